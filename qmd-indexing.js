'use strict'
// `llm-wiki-retrieval/qmd-indexing`: the lifecycle entry points of pi-llm-wiki's
// `lib/qmd-indexing.ts` (the TypeScript release's QMD indexing), with its names, signatures and
// result shapes, implemented over this engine's native exports. The client's module becomes a
// re-export of this one (examples/pi-llm-wiki/patches/0001-…); see docs/INTEGRATION.md.
//
// What differs, by design:
//  - the index is this engine's store, in the directory `paths.qmd` names (`<meta>/qmd`); a QMD
//    store of the TypeScript release there stays readable until this engine's index is
//    published, then is removed (docs/STORE-FORMAT.md, "Migration");
//  - `deps` (the QMD store factory and the fs seam, test injection points of the old engine) is
//    accepted for signature compatibility and ignored: there is no QMD store to open;
//  - the writer lock is the engine's OS lock; a live lock of the TypeScript release's writer
//    (`index.lock/owner.json` without our `engine` field) makes this engine busy too.
const fs = require('node:fs')
const path = require('node:path')
const binding = require('./index.js')

const SWAP_PHASES = ['prepared', 'previous-moved', 'current-promoted', 'validated']

/**
 * The phase of the TypeScript release's swap journal (`<qmd>/swap.json`) when one is present and
 * valid, else undefined. Read only while a QMD store is still pending migration.
 */
function qmdSwapPhase(paths) {
  try {
    const journal = JSON.parse(fs.readFileSync(path.join(paths.qmd, 'swap.json'), 'utf8'))
    return journal && journal.version === 1 && SWAP_PHASES.includes(journal.phase) ? journal.phase : undefined
  } catch {
    return undefined
  }
}

class QmdIndexError extends Error {
  constructor(code, message) {
    super(message)
    this.code = code
    this.name = 'QmdIndexError'
  }
}

/** A rejection of the engine as a QmdIndexError with the same stable code. */
function asQmdError(err) {
  if (err instanceof QmdIndexError) return err
  const code = err && typeof err.code === 'string' ? err.code : 'qmd_index_error'
  return new QmdIndexError(code, err && err.message ? err.message : String(err))
}

// ── In-process per-vault queue (same-extension calls run one after another) ───────────────

const queues = new Map()

function enqueue(root, work) {
  const prev = queues.get(root) || Promise.resolve()
  const next = prev.then(work, work)
  queues.set(
    root,
    next.catch(() => undefined),
  )
  return next
}

/** Resolves when the work queued so far for the vault `root` has settled. */
function awaitQmdIndexQueue(root) {
  return queues.get(root) || Promise.resolve()
}

// ── Status ─────────────────────────────────────────────────────────────────────────────────

/** The engine's status is a superset of `QmdGeneratedStatus`; the client's fields come first. */
function toQmdStatus(s, paths) {
  // A QMD store of the TypeScript release interrupted mid-swap: the client's `recovering` state
  // with the journal's phase (the next reindex or start-up recovery migrates it).
  if (paths && s && (s.state === 'stale' || s.state === 'missing') && !fs.existsSync(path.join(paths.qmd, 'CURRENT'))) {
    const phase = qmdSwapPhase(paths)
    if (phase) return { ...s, state: 'recovering', swapPhase: phase, repairComponents: [] }
  }
  return s
}

/**
 * Status of the vault's generated index without opening it or loading a model (the client's
 * `readQmdIndexStatus`). Never rejects for a broken store: problems are `error` / `stale`
 * states with issues.
 */
async function readQmdIndexStatus(paths) {
  try {
    return toQmdStatus(await binding.readIndexStatus(paths, { checkPages: true }), paths)
  } catch (err) {
    const e = asQmdError(err)
    return {
      state: 'error',
      qmdVersion: binding.engineInfo().version,
      models: { embed: '', generate: '', rerank: '' },
      totalDocuments: 0,
      canonicalDocuments: 0,
      evidenceDocuments: 0,
      needsEmbedding: 0,
      hasVectorIndex: false,
      repairComponents: ['lexical'],
      issues: [{ code: e.code, message: e.message }],
    }
  }
}

// ── Vault identity ─────────────────────────────────────────────────────────────────────────

/**
 * The vault's stable `vault_id` from `config.json`, backfilled once when absent (other keys
 * kept). Rejects with a `QmdIndexError` `config_invalid` / `config_invalid_vault_id`, leaving
 * the file untouched.
 */
async function ensureVaultId(paths) {
  try {
    return await binding.ensureVaultId(paths)
  } catch (err) {
    throw asQmdError(err)
  }
}

// ── Reindex ────────────────────────────────────────────────────────────────────────────────

function emptyResult(options, started) {
  return {
    ok: false,
    scope: options && options.scope,
    components: [...new Set((options && options.components) || [])],
    documents: { indexed: 0, updated: 0, unchanged: 0, removed: 0 },
    vectors: { generated: 0, skipped: 0, errors: 0 },
    elapsedMs: Date.now() - started,
    warnings: [],
    errors: [],
  }
}

/**
 * Reindex the vault (the client's `reindexQmdVault(paths, {scope, components, force, signal,
 * onProgress}, deps?)`). Runs after the vault's earlier queued work. Resolves with the
 * `QmdReindexResult` shape (plus the engine's `chunks`, `generation`, `fullRebuild`): a busy lock
 * (`qmd_index_busy`), a cancellation (no error) or a failure is `ok: false`, never a rejection.
 */
function reindexQmdVault(paths, options, _deps) {
  const started = Date.now()
  return enqueue(paths.root, async () => {
    const opts = options || {}
    const onProgress = typeof opts.onProgress === 'function' ? opts.onProgress : undefined
    try {
      const out = await binding.reindexWiki(paths, {
        vault: 'active',
        scope: opts.scope,
        components: opts.components,
        force: opts.force === true,
        removalsOnly: opts.removalsOnly === true,
        signal: opts.signal,
        onProgress: onProgress ? (ev) => onProgress(ev.progress) : undefined,
      })
      const r = out.results[0].result
      return { ...r, status: toQmdStatus(r.status, paths) }
    } catch (err) {
      const e = asQmdError(err)
      const res = emptyResult(opts, started)
      res.errors.push({ code: e.code, message: e.message })
      res.status = await readQmdIndexStatus(paths)
      return res
    }
  })
}

// ── Recovery ───────────────────────────────────────────────────────────────────────────────

/**
 * Start-up recovery (the client's `recoverQmdIndex(paths, deps?)`): removes what an interrupted
 * writer left and checks the published store, under the writer lock. `{ok: false}` with a
 * `qmd_index_busy` diagnostic when another writer holds the store. A QMD store of the TypeScript
 * release (`qmd_migration_pending`) is migrated here by a lexical reindex, so recall never goes
 * empty across the upgrade: `qmd_migrated` (info) on success; on failure the QMD files stay and
 * the reindex's error is reported. Otherwise it never rebuilds.
 */
function recoverQmdIndex(paths, _deps) {
  return enqueue(paths.root, async () => {
    try {
      const out = await binding.recoverIndex(paths)
      if (!out.diagnostics.some((d) => d.code === 'qmd_migration_pending')) return out
      // A malformed swap journal is left for inspection, as the TypeScript release did.
      if (fs.existsSync(path.join(paths.qmd, 'swap.json')) && !qmdSwapPhase(paths)) return out
      try {
        const migrated = await binding.reindexWiki(paths, { vault: 'active', scope: 'changed', components: ['lexical'] })
        const r = migrated.results[0].result
        if (!r.ok) {
          const errors = (r.errors || []).map((e) => ({ severity: 'error', code: e.code, path: paths.qmd, message: e.message }))
          return { ok: false, diagnostics: [...out.diagnostics, ...errors] }
        }
        const rest = out.diagnostics.filter((d) => d.code !== 'qmd_migration_pending')
        const info = {
          severity: 'info',
          code: 'qmd_migrated',
          path: paths.qmd,
          message: `QMD store migrated to the llm-wiki-retrieval index (${r.status.totalDocuments} documents, lexical; run wiki_reindex with vectors for semantic recall)`,
        }
        return { ok: out.ok, diagnostics: [...rest, info] }
      } catch (err) {
        const e = asQmdError(err)
        return { ok: false, diagnostics: [...out.diagnostics, { severity: 'error', code: e.code, path: paths.qmd, message: e.message }] }
      }
    } catch (err) {
      const e = asQmdError(err)
      return { ok: false, diagnostics: [{ severity: 'error', code: e.code, path: paths.qmd || paths.root, message: e.message }] }
    }
  })
}

/**
 * Safety pass after a metadata projection failure (the client's
 * `invalidateQmdAfterProjectionFailure`, whose contract is "remove unsafe entries, never index
 * valid additions"): a `removalsOnly` reindex, which takes out pages whose file is gone and
 * indexed pages that no longer validate, and adds, updates and embeds nothing (the next ordinary
 * reindex does). Best effort: never rejects; a busy store or a failure is left for status to
 * report.
 */
async function invalidateQmdAfterProjectionFailure(paths, deps) {
  // Nothing published, nothing to invalidate (the engine builds nothing then either).
  if (!fs.existsSync(path.join(paths.qmd, 'CURRENT'))) return
  try {
    await reindexQmdVault(paths, { scope: 'changed', components: ['lexical'], removalsOnly: true }, deps)
  } catch {
    // Best effort, as in the client: status shows the state.
  }
}

exports.QmdIndexError = QmdIndexError
exports.awaitQmdIndexQueue = awaitQmdIndexQueue
exports.ensureVaultId = ensureVaultId
exports.invalidateQmdAfterProjectionFailure = invalidateQmdAfterProjectionFailure
exports.readQmdIndexStatus = readQmdIndexStatus
exports.recoverQmdIndex = recoverQmdIndex
exports.reindexQmdVault = reindexQmdVault
