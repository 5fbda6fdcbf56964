// Types of `llm-wiki-retrieval/qmd-indexing`: pi-llm-wiki's `lib/qmd-indexing.ts` surface (names,
// signatures, result shapes) over this engine. Written by hand (the napi build generates only
// index.d.ts); `__test__/qmd-indexing.test.mjs` checks that every name here is exported.
import type { IndexIssue, IndexStatus, VaultPaths } from './index'

export type QmdComponent = 'lexical' | 'vectors'
export type QmdReindexScope = 'changed' | 'all'
export type QmdIndexState = 'missing' | 'ready' | 'stale' | 'recovering' | 'error'
export type QmdSwapPhase = 'prepared' | 'previous-moved' | 'current-promoted' | 'validated'

/** The client's resolved model ids (`embed`, `generate`, `rerank`); "" when none. */
export interface QmdResolvedModels {
  embed: string
  generate: string
  rerank: string
}

export interface QmdIndexProgress {
  stage: 'mirror' | 'copy' | 'lexical' | 'vectors' | 'validate' | 'swap'
  message: string
  current?: number
  total?: number
}

export interface QmdReindexOptions {
  scope: QmdReindexScope
  components: QmdComponent[]
  force?: boolean
  /** Only take out pages that are gone or no longer validate; add, update and embed nothing. */
  removalsOnly?: boolean
  signal?: AbortSignal
  onProgress?: (progress: QmdIndexProgress) => void
}

export type QmdIndexIssue = IndexIssue

/** The client's `QmdGeneratedStatus`; this engine's status carries extra fields besides. */
export interface QmdGeneratedStatus extends Partial<Omit<IndexStatus, 'state' | 'models' | 'issues' | 'repairComponents'>> {
  state: QmdIndexState
  vaultId?: string
  qmdVersion: string
  models: QmdResolvedModels
  totalDocuments: number
  canonicalDocuments: number
  evidenceDocuments: number
  needsEmbedding: number
  hasVectorIndex: boolean
  manifestHash?: string
  indexedManifestHash?: string
  lastIndexedAt?: string
  swapPhase?: QmdSwapPhase
  /** Valid tool component values that a reindex can use to repair this state. */
  repairComponents: QmdComponent[]
  issues: QmdIndexIssue[]
}

export interface QmdReindexResult {
  ok: boolean
  vaultId?: string
  scope: QmdReindexScope
  components: QmdComponent[]
  documents: { indexed: number; updated: number; unchanged: number; removed: number }
  vectors: { generated: number; skipped: number; errors: number }
  elapsedMs: number
  status: QmdGeneratedStatus
  warnings: QmdIndexIssue[]
  errors: QmdIndexIssue[]
  /** Engine extras (absent when the call failed before indexing). */
  chunks?: { total: number; added: number; removed: number }
  fullRebuild?: boolean
  generation?: number
}

/** A recovery finding (the client's `KnowledgeDiagnostic` shape). */
export interface QmdRecoverDiagnostic {
  severity: 'error' | 'warning' | 'info'
  code: string
  path: string
  message: string
}

export interface QmdRecoverResult {
  ok: boolean
  diagnostics: QmdRecoverDiagnostic[]
}

/**
 * The old engine's injection points (QMD store factory, fs seam). Accepted for signature
 * compatibility and ignored: this engine opens no QMD store.
 */
export interface QmdIndexDeps {
  factory?: unknown
  fs?: unknown
}

export declare class QmdIndexError extends Error {
  readonly code: string
  constructor(code: string, message: string)
}

/** Reindex the vault; busy, cancelled or failed runs resolve `ok: false` (never reject). */
export declare function reindexQmdVault(
  paths: VaultPaths,
  options: QmdReindexOptions,
  deps?: Partial<QmdIndexDeps>,
): Promise<QmdReindexResult>

/**
 * Start-up recovery under the writer lock; `ok: false` with `qmd_index_busy` when busy. A QMD
 * store of the TypeScript release is migrated here (lexical reindex; `qmd_migrated` info), unless
 * its swap journal is malformed (left for inspection, `qmd_migration_pending`).
 */
export declare function recoverQmdIndex(paths: VaultPaths, deps?: Partial<QmdIndexDeps>): Promise<QmdRecoverResult>

/**
 * Best-effort lexical safety pass after a metadata projection failure; never rejects. Does
 * nothing where no index is published (it never builds one); otherwise a lexical `changed`
 * reindex (drops removed and invalid pages; it may also index valid additions).
 */
export declare function invalidateQmdAfterProjectionFailure(
  paths: VaultPaths,
  deps?: Partial<QmdIndexDeps>,
): Promise<void>

/**
 * Status without opening the index or loading a model. A QMD store interrupted mid-swap (valid
 * `swap.json`, no store of ours yet) is `recovering` with its `swapPhase`.
 */
export declare function readQmdIndexStatus(paths: VaultPaths): Promise<QmdGeneratedStatus>

/** Resolves when the work queued so far for the vault `root` has settled. */
export declare function awaitQmdIndexQueue(root: string): Promise<unknown>

/** The vault's `vault_id`, backfilled once; rejects with QmdIndexError `config_invalid*`. */
export declare function ensureVaultId(paths: VaultPaths): Promise<string>
