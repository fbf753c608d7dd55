import type { ColumnType, Generated } from 'kysely';

/**
 * A json or jsonb column: read back parsed, written as a JSON string. Writing strings keeps node-pg from
 * turning a JS array into a Postgres array literal.
 */
export type Json = ColumnType<unknown, string, string>;
export type NullableJson = ColumnType<unknown, string | null | undefined, string | null>;

/** bigint columns hold epoch milliseconds; the pool parses int8 into a JS number. */
export type Millis = number;

export interface CoordinatorsTable {
  id: string;
  epoch: number;
  lease_until: Millis;
  started_at: Millis;
  http_url: string | null;
  /** The session advisory lock the coordinator's process holds while it runs (migration 014); null: it holds none. */
  liveness_key: number | null;
  /** When the lease was last claimed or renewed; null before migration 014. */
  renewed_at: Millis | null;
}

export interface RunOwnerTable {
  run_id: string;
  coordinator_id: string;
  epoch: number;
  /** False once the run has finished: restart, adoption and the search for dead coordinators skip it. */
  live: Generated<boolean>;
}

export interface RunEventsTable {
  run_id: string;
  seq: number;
  event: Json;
  received_at: Millis;
  state_after: Json;
  /** The coordinator and lease epoch that journaled the row (null before migration 007). */
  written_by: string | null;
  writer_epoch: number | null;
}

export interface RunSnapshotsTable {
  run_id: string;
  seq: number;
  machine_id: string;
  machine_version: number;
  snapshot: Json;
  status: string;
  updated_at: Millis;
}

export interface RunsTable {
  run_id: string;
  workflow_name: string | null;
  repository: string | null;
  status: string;
  created_at: Millis | null;
  updated_at: Millis | null;
  finished_at: Millis | null;
  failure_reason: string | null;
  init_failure: NullableJson;
  input_summary: NullableJson;
  /** The run's number in its repository (#1, #2…), given by the database on insert (migration 019). */
  number: Generated<number | null>;
  /** When its journal, snapshot and logs went into its archive (migration 020); null: they are in the database. */
  archived_at: Generated<Millis | null>;
}

export interface JobsTable {
  run_id: string;
  job_key: string;
  status: string;
  waiting_reason: NullableJson;
  attempt: ColumnType<number, number | undefined, number>;
  agent_id: string | null;
  dispatch_id: string | null;
  outcome: string | null;
  init_failure: NullableJson;
  updated_at: Millis;
  /** The current attempt's steps as agents reported them (StepRecord[]). */
  steps: ColumnType<unknown, string | undefined, string>;
  duration_ms: Millis | null;
  outputs: NullableJson;
  /** When the job last entered each status (`pending`: its creation); null for jobs written before it was kept. */
  times: NullableJson;
}

export interface TimersTable {
  run_id: string;
  deadline_id: string;
  kind: string;
  job_key: string | null;
  due_at: Millis;
}

export interface RunInboxTable {
  id: ColumnType<number, never, never>;
  run_id: string;
  event: Json;
  created_at: Millis;
}

export interface ConcurrencyGroupsTable {
  key: string;
  snapshot: Json;
  updated_at: Millis;
}

export interface OutboxTable {
  effect_id: string;
  run_id: string;
  kind: string;
  payload: Json;
  created_at: Millis;
  done_at: Millis | null;
}

export interface AgentTokensTable {
  id: string;
  token_hash: string;
  prefix: string;
  agent_type: 'static' | 'ephemeral';
  labels: NullableJson;
  mandatory_labels: ColumnType<unknown, string | undefined, string>;
  created_by: string | null;
  created_at: Millis;
  expires_at: Millis | null;
  revoked_at: Millis | null;
  consumed_at: Millis | null;
  last_seen_at: Millis | null;
}

export interface JobLogsTable {
  id: ColumnType<number, never, never>;
  run_id: string;
  job_key: string;
  dispatch_id: string;
  step_index: number;
  lines: Json;
  bytes: number;
  created_at: Millis;
  /** The agent's timestamp of the chunk; null for chunks stored before it was kept. */
  sent_at: ColumnType<Millis | null, Millis | null | undefined, never>;
}

export interface AgentSessionsTable {
  agent_id: string;
  coordinator_id: string;
  connection_id: string;
  token_id: string | null;
  labels: Json;
  max_concurrency: number;
  slots_used: number;
  connected_at: Millis;
  last_heartbeat_at: Millis;
  properties: Json;
  taints: Json;
  scaler_managed: boolean;
}

export interface PlacementRequestsTable {
  run_id: string;
  job_key: string;
  attempt: number;
  owner_id: string;
  requirements: Json;
  created_at: Millis;
  claimed_by: string | null;
  claim_until: Millis | null;
}

export interface AgentOutboxTable {
  id: ColumnType<number, never, never>;
  coordinator_id: string;
  agent_id: string;
  kind: string;
  payload: Json;
  created_at: Millis;
}

/** Every table Switchyard owns (migrations/001_core.ts). */
export interface DeliveriesTable {
  source: string;
  delivery_id: string;
  event_name: string;
  headers: Json;
  body: Buffer;
  received_at: Millis;
  status: string;
  attempts: ColumnType<number, number | undefined, number>;
  next_attempt_at: Millis;
  claimed_by: string | null;
  claim_until: Millis | null;
  last_error: string | null;
  outcome: NullableJson;
  processed_at: Millis | null;
}

export interface RepositoriesTable {
  name: string;
  provider: 'local' | 'github';
  path: string | null;
  clone_url: string | null;
  default_branch: string | null;
  token: string | null;
  /** Repositories (names or `owner/*`) whose emitted events this one accepts besides its own. */
  accepts_events_from: ColumnType<string[], string | undefined, string>;
  created_at: Millis;
}

/** An event a workflow emitted (`ctx.emit`) and the repositories it was delivered to. */
export interface EmittedEventsTable {
  event_id: string;
  run_id: string;
  job_key: string;
  repository: string;
  event_name: string;
  targets: ColumnType<string[], string, string>;
  created_at: Millis;
}

export interface GenericSourcesTable {
  name: string;
  verification: 'hmac-sha256' | 'api-key' | 'none';
  header: string | null;
  secret: string | null;
  event_type_header: string | null;
  idempotency_header: string | null;
  repository: string;
  created_at: Millis;
}

export interface EnvironmentsTable {
  name: string;
  branches: Json;
  minimum_trust: 'trusted' | 'known' | 'unknown' | null;
  approval_required: boolean;
  approvers: string | null;
  hold_expiry_seconds: number;
  /** Read by test runs (SEC-6): only such environments accept locally supplied secrets. */
  allow_local_execution: boolean;
  created_at: Millis;
  updated_at: Millis;
}

export interface EnvironmentRepositoriesTable {
  environment: string;
  repository: string;
}

export interface EnvironmentVariablesTable {
  environment: string;
  key: string;
  value: string;
  updated_at: Millis;
}

export interface ApprovalGatesTable {
  run_id: string;
  gate_id: string;
  job_key: string;
  /** Null once the environment was deleted (ENV-3). */
  environment: string | null;
  kind: 'approval' | 'security';
  status: 'pending' | 'approved' | 'rejected' | 'expired';
  reason: string;
  comment: string | null;
  decided_by: string | null;
  decided_at: Millis | null;
  opened_at: Millis;
  expires_at: Millis;
}

/** A periodic job's durable schedule and lease (migration 020): one coordinator at a time runs it. */
export interface MaintenanceJobsTable {
  name: string;
  next_run_at: Millis;
  holder: string | null;
  lease_until: Millis | null;
  last_report: NullableJson;
}

export interface Schema {
  maintenance_jobs: MaintenanceJobsTable;
  environments: EnvironmentsTable;
  environment_repositories: EnvironmentRepositoriesTable;
  environment_variables: EnvironmentVariablesTable;
  approval_gates: ApprovalGatesTable;
  deliveries: DeliveriesTable;
  repositories: RepositoriesTable;
  generic_sources: GenericSourcesTable;
  coordinators: CoordinatorsTable;
  run_owner: RunOwnerTable;
  run_events: RunEventsTable;
  run_snapshots: RunSnapshotsTable;
  runs: RunsTable;
  jobs: JobsTable;
  timers: TimersTable;
  outbox: OutboxTable;
  run_inbox: RunInboxTable;
  concurrency_groups: ConcurrencyGroupsTable;
  agent_tokens: AgentTokensTable;
  job_logs: JobLogsTable;
  agent_sessions: AgentSessionsTable;
  placement_requests: PlacementRequestsTable;
  agent_outbox: AgentOutboxTable;
  secrets: SecretsTable;
  secret_audit: SecretAuditTable;
  run_keys: RunKeysTable;
  secret_outputs: SecretOutputsTable;
  test_uploads: TestUploadsTable;
  test_run_secrets: TestRunSecretsTable;
  attempt_secrets: AttemptSecretsTable;
  blobs: BlobsTable;
  blob_chunks: BlobChunksTable;
  blob_uploads: BlobUploadsTable;
  user_cache_entries: UserCacheEntriesTable;
  attestations: AttestationsTable;
  emitted_events: EmittedEventsTable;
  build_caches: BuildCachesTable;
}

/** A source or dependency tarball a build job uploaded, by repository, trust scope, kind and key. */
export interface BuildCachesTable {
  repository: string;
  scope: 'trusted' | 'untrusted';
  kind: 'source' | 'deps';
  cache_key: string;
  blob_key: string;
  size_bytes: number;
  sha256: string;
  created_at: Millis;
  last_used_at: Millis;
  created_by_run: string;
}

/** An object of the Postgres blob store: under its key once committed, under its staging id before. */
export interface BlobsTable {
  id: Generated<number>;
  key: string | null;
  staging_id: string | null;
  size_bytes: number;
  sha256: string | null;
  created_at: Millis;
}

export interface BlobChunksTable {
  blob_id: number;
  seq: number;
  data: Buffer;
}

/** An upload URL handed to an agent for one attempt: what it may write (`purpose`, `target`), until when, and what it wrote. */
export interface BlobUploadsTable {
  upload_id: string;
  purpose: string;
  repository: string;
  target: string;
  run_id: string;
  job_key: string;
  dispatch_id: string;
  agent_id: string;
  max_bytes: number;
  expires_at: Millis;
  staging_id: string | null;
  size_bytes: number | null;
  sha256: string | null;
  uploaded_at: Millis | null;
  created_at: Millis;
}

/** A user cache entry (`ctx.cache`): immutable once written; `scope` keeps branches and untrusted runs apart. */
export interface UserCacheEntriesTable {
  repository: string;
  scope: string;
  key: string;
  blob_key: string;
  size_bytes: number;
  sha256: string;
  created_at: Millis;
  last_used_at: Millis;
  created_by_run: string;
}

/** A provenance bundle a job attested (`ctx.attestProvenance`). */
export interface AttestationsTable {
  id: Generated<number>;
  run_id: string;
  job_key: string;
  subject_name: string;
  subject_digest: string;
  media_type: string;
  blob_key: string;
  size_bytes: number;
  sha256: string;
  created_at: Millis;
}

/** The secret values sent to one attempt, as a JSON list sealed under the master key (AAD `attempt:<dispatchId>`), for redaction. */
export interface AttemptSecretsTable {
  dispatch_id: string;
  run_id: string;
  ciphertext: string;
  key_version: string;
  created_at: Millis;
}

/** A secret value sealed under the master key (AAD `scope:key`); `key_version` names that key. */
export interface SecretsTable {
  scope: string;
  key: string;
  ciphertext: string;
  key_version: string;
  created_at: Millis;
  updated_at: Millis;
}

export interface SecretAuditTable {
  id: ColumnType<number, never, never>;
  at: Millis;
  actor: string;
  /** `put`, `delete`, `rotate`, `resolve`, `reveal`. */
  action: string;
  run_id: string | null;
  job_key: string | null;
  dispatch_id: string | null;
  scope: string | null;
  /** Key names only, never values. */
  keys: Json;
  outcome: string;
}

/** A run's X25519 pair for secret outputs; `private_key` is sealed under the master key (AAD `run-key:<runId>`). */
export interface RunKeysTable {
  run_id: string;
  public_key: string;
  private_key: string;
  key_version: string;
  created_at: Millis;
}

/** An agent's secret output as received: encrypted to the run's public key. */
export interface SecretOutputsTable {
  run_id: string;
  job_key: string;
  name: string;
  dispatch_id: string;
  agent_public_key: string;
  encrypted: string;
  created_at: Millis;
}

/** A test upload's X25519 pair; `private_key` is sealed under the master key (AAD `upload-key:<uploadId>`). */
export interface TestUploadsTable {
  upload_id: string;
  public_key: string;
  private_key: string;
  key_version: string;
  created_at: Millis;
  expires_at: Millis;
}

/** A test run's secrets blob, still encrypted to its upload's key. */
export interface TestRunSecretsTable {
  run_id: string;
  upload_id: string;
  sender_public_key: string;
  encrypted_secrets: string;
  created_at: Millis;
}
