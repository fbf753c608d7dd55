export {
  IsolatedVmSandbox,
  type IsolatedVmSandboxOptions,
  type Sandbox,
  type SandboxExpectation,
  type SandboxRequest,
  type SandboxResult,
} from './evaluator.ts';
export { NodeSnapshotEnabledError, SandboxDisposedError } from './errors.ts';
