import type { Kysely } from 'kysely';
import picomatch from 'picomatch';
import { z } from 'zod';
import { deleteEnvironment, deleteVariable, getEnvironment, loadEnvironments, putEnvironment, putVariable } from '../db/environments.ts';
import type { EnvironmentRecord } from '../db/environments.ts';
import type { Schema } from '../db/schema.ts';
import { HttpError, parseBody, readJson, sendJson } from './respond.ts';
import type { Router } from './router.ts';

export interface EnvironmentApiDeps {
  db: Kysely<Schema>;
  now: () => number;
}

const NAME = /^[A-Za-z0-9][\w.-]{0,99}$/;
/** A shell variable name the agent can export; `KICI_*` and `SWITCHYARD_*` belong to the agent. */
const VARIABLE_KEY = /^(?!KICI_)(?!SWITCHYARD_)[A-Za-z_][A-Za-z0-9_]{0,255}$/;
const MAX_VALUE = 32 * 1024;
const MAX_VARIABLES = 200;
const DAY_S = 86_400;

function isGlob(pattern: string): boolean {
  try {
    picomatch.makeRe(pattern);
    return pattern.length > 0 && pattern.length <= 200;
  } catch {
    return false;
  }
}

const variableValue = z.string().max(MAX_VALUE, `at most ${MAX_VALUE} characters`);
const KEY_RULE = 'a variable name is letters, digits and _, not starting with a digit, KICI_ or SWITCHYARD_';
const variables = z.record(z.string(), variableValue).superRefine((vars, ctx) => {
  const keys = Object.keys(vars);
  if (keys.length > MAX_VARIABLES) ctx.addIssue({ code: 'custom', message: `at most ${MAX_VARIABLES} variables` });
  for (const key of keys.filter((k) => !VARIABLE_KEY.test(k))) ctx.addIssue({ code: 'custom', path: [key], message: KEY_RULE });
});

const environmentSchema = z
  .object({
    repositories: z.array(z.string().regex(/^[\w.-]+\/[\w.-]+$/, 'must be owner/name')).max(500).default([]),
    branches: z.array(z.string().refine(isGlob, 'must be a branch glob (picomatch)')).max(100).default([]),
    minimumTrust: z.enum(['trusted', 'known', 'unknown']).nullable().default(null),
    approvalRequired: z.boolean().default(false),
    approvers: z.string().max(500).nullable().default(null),
    holdExpirySeconds: z.number().int().min(60).max(30 * DAY_S).default(DAY_S),
    allowLocalExecution: z.boolean().default(false),
    variables: variables.optional(),
  })
  .strict();

const variableSchema = z.object({ value: variableValue }).strict();

function nameOf(params: Record<string, string>): string {
  const name = params['name'] ?? '';
  if (!NAME.test(name)) throw new HttpError(400, 'invalid request', 'name: letters, digits, dot, dash and underscore, at most 100, starting with a letter or digit');
  return name;
}

function keyOf(params: Record<string, string>): string {
  const key = params['key'] ?? '';
  if (!VARIABLE_KEY.test(key)) throw new HttpError(400, 'invalid request', `key: ${KEY_RULE}`);
  return key;
}

/** The summary a listing shows: variable names, not values. */
function summary({ variables: vars, ...rest }: EnvironmentRecord) {
  return { ...rest, variableKeys: Object.keys(vars) };
}

/** Environments (docs/http-api.md#environments): CRUD, variables, and the 409 of ENV-3. */
export function registerEnvironmentRoutes(router: Router, deps: EnvironmentApiDeps): void {
  const { db } = deps;
  router
    .on('GET', '/api/v1/environments', async ({ res }) => {
      sendJson(res, 200, { environments: (await loadEnvironments(db)).map(summary) });
    })
    .on('GET', '/api/v1/environments/:name', async ({ res, params }) => {
      const name = nameOf(params);
      const environment = await getEnvironment(db, name);
      if (!environment) throw new HttpError(404, 'not found', `no environment ${name}`);
      sendJson(res, 200, environment);
    })
    .on('PUT', '/api/v1/environments/:name', async ({ req, res, params }) => {
      const name = nameOf(params);
      const { variables: given, ...settings } = parseBody(environmentSchema, await readJson(req, 1024 * 1024));
      const created = await putEnvironment(db, { name, ...settings, repositories: [...new Set(settings.repositories)] }, given, deps.now());
      sendJson(res, created ? 201 : 200, { ...(await getEnvironment(db, name)), created });
    })
    .on('DELETE', '/api/v1/environments/:name', async ({ res, params }) => {
      const name = nameOf(params);
      const outcome = await deleteEnvironment(db, name);
      if (outcome.deleted) return sendJson(res, 200, { name, deleted: true });
      if (outcome.reason === 'not_found') throw new HttpError(404, 'not found', `no environment ${name}`);
      const reason = `environment ${name} holds runs waiting for approval; approve, reject or cancel them first`;
      sendJson(res, 409, { error: 'pending_held_runs', reason, runIds: outcome.runIds });
    })
    .on('PUT', '/api/v1/environments/:name/variables/:key', async ({ req, res, params }) => {
      const [name, key] = [nameOf(params), keyOf(params)];
      const { value } = parseBody(variableSchema, await readJson(req, 64 * 1024));
      const environment = await getEnvironment(db, name);
      if (environment && !(key in environment.variables) && Object.keys(environment.variables).length >= MAX_VARIABLES) {
        throw new HttpError(400, 'invalid request', `environment ${name} has ${MAX_VARIABLES} variables already`);
      }
      if (!environment || !(await putVariable(db, name, key, value, deps.now()))) throw new HttpError(404, 'not found', `no environment ${name}`);
      sendJson(res, 200, { environment: name, key, value });
    })
    .on('DELETE', '/api/v1/environments/:name/variables/:key', async ({ res, params }) => {
      const [name, key] = [nameOf(params), keyOf(params)];
      if (!(await deleteVariable(db, name, key))) throw new HttpError(404, 'not found', `no variable ${key} in environment ${name}`);
      sendJson(res, 200, { environment: name, key, deleted: true });
    });
}
