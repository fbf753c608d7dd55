import type { AgentSession } from '../../actors/agents/registry.ts';
import { CLOSE_CODES } from './messages.ts';
import type { AgentMessageOf } from './messages.ts';

/** What the connection knows about the token it authenticated with (docs/protocol.md#tokens). */
export interface TokenInfo {
  id: string;
  agentType: 'static' | 'ephemeral';
  labels: string[] | null;
  mandatoryLabels: string[];
  createdBy: string | null;
}

export type GateResult = { ok: true; handover: AgentSession | undefined } | { ok: false; code: number; reason: string };

const PRIVILEGED = 'kici:privileged:root';
const SELF_REPORTED = /^kici:(os|arch|host):/;

/**
 * Register gates G0–G3 (docs/protocol.md#register-gates), run on every `agent.register` of a socket. A failed
 * credential gate is a permanent 4010; an agentId held by another token is 4003.
 */
export function checkRegisterGates(
  message: AgentMessageOf<'agent.register'>,
  token: TokenInfo | null,
  existing: AgentSession | undefined,
  connectionId: string,
): GateResult {
  const scope = token?.labels ?? null;
  const taints = token?.mandatoryLabels ?? [];
  const privileged = [...message.labels, ...(scope ?? []), ...taints].includes(PRIVILEGED);
  if (privileged && message.runningAsUid !== 0) {
    return { ok: false, code: CLOSE_CODES.AUTH_FAILED, reason: `Label ${PRIVILEGED} requires running as uid 0` };
  }
  if (scope) {
    const outside = message.labels.filter((label) => !SELF_REPORTED.test(label) && !scope.includes(label));
    if (outside.length > 0) {
      return { ok: false, code: CLOSE_CODES.AUTH_FAILED, reason: `Agent labels exceed token-bound scope: ${outside.join(', ')}` };
    }
  }
  if (token?.agentType === 'ephemeral') {
    const bound = (token.createdBy ?? '').replace(/^bootstrap:/, '');
    if (bound !== message.agentId) {
      return { ok: false, code: CLOSE_CODES.AUTH_FAILED, reason: `Token is bound to agent ${bound || '(none)'}` };
    }
  }
  if (existing && existing.connectionId !== connectionId && existing.tokenId !== (token?.id ?? null)) {
    return { ok: false, code: CLOSE_CODES.INVALID_MESSAGE, reason: `Agent id ${message.agentId} is held by another token` };
  }
  return { ok: true, handover: existing };
}
