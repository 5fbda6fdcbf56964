// `llm-wiki-retrieval/qmd-indexing`: pi-llm-wiki's lifecycle names over this engine (issue 12):
// the package export, the client's result shapes, the store under `paths.qmd`, the migration of a
// QMD store of the TypeScript release (its documented layout), the TypeScript writer's lock, and
// start-up recovery.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { afterEach, beforeEach, describe, test } from 'node:test'

import { EXPLICIT, UUID_V4, addon, makeTmp, makeVault, noPersonalVault, page, readJson, repoRoot, rmDir, storeDirs, topicPages } from './helpers.mjs'

const require = createRequire(import.meta.url)
// Self-reference through package.json "exports", exactly as a consumer imports it.
const qmd = require('llm-wiki-retrieval/qmd-indexing')

let base
beforeEach(() => {
  base = makeTmp()
  noPersonalVault(base)
})
afterEach(() => rmDir(base))

/** The client's VaultPaths for a new-layout vault at `root` (lib/utils.ts getVaultPaths). */
function clientPaths(root) {
  const dotWiki = path.join(root, '.llm-wiki')
  const meta = path.join(dotWiki, 'meta')
  const q = path.join(meta, 'qmd')
  return {
    root,
    dotWiki,
    raw: path.join(dotWiki, 'raw'),
    rawSources: path.join(dotWiki, 'raw', 'sources'),
    rawTrajectories: path.join(dotWiki, 'raw', 'trajectories'),
    wiki: path.join(dotWiki, 'wiki'),
    meta,
    outputs: path.join(dotWiki, 'outputs'),
    discoveries: path.join(dotWiki, '.discoveries'),
    qmd: q,
    qmdCurrent: path.join(q, 'current'),
    qmdDocuments: path.join(q, 'documents'),
    qmdManifest: path.join(q, 'manifest.json'),
    qmdSwap: path.join(q, 'swap.json'),
  }
}

/** A QMD store as the TypeScript release writes it (lib/qmd-indexing.ts, lib/qmd-mirror.ts). */
function writeQmdStore(p, vaultId) {
  fs.mkdirSync(p.qmdCurrent, { recursive: true })
  fs.writeFileSync(path.join(p.qmdCurrent, 'index.sqlite'), 'SQLite format 3\0')
  fs.writeFileSync(
    path.join(p.qmdCurrent, 'index-state.json'),
    JSON.stringify({ version: 1, vaultId, qmdVersion: '2.5.3', models: { embed: 'e', generate: 'g', rerank: 'r' }, manifestHash: 'h', indexedAt: 'x', status: { totalDocuments: 1, canonicalDocuments: 1, evidenceDocuments: 0, needsEmbedding: 0, hasVectorIndex: false } }),
  )
  fs.mkdirSync(path.join(p.qmdDocuments, 'canonical', 'concepts'), { recursive: true })
  fs.writeFileSync(path.join(p.qmdDocuments, 'canonical', 'concepts', 'topic-0.md'), 'mirror')
  fs.writeFileSync(p.qmdManifest, JSON.stringify({ version: 1, vaultId, entries: {} }))
}

function qmdLock(p, owner) {
  const dir = path.join(p.qmd, 'index.lock')
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, 'owner.json'), JSON.stringify(owner))
  return dir
}

describe('llm-wiki-retrieval/qmd-indexing', () => {
  test('exports the names the .d.ts declares, and package.json exposes and ships the entry', () => {
    const dts = fs.readFileSync(path.join(repoRoot, 'qmd-indexing.d.ts'), 'utf8')
    const declared = [...dts.matchAll(/^export declare (?:function|class) (\w+)/gm)].map((m) => m[1]).sort()
    assert.deepEqual(declared, ['QmdIndexError', 'awaitQmdIndexQueue', 'ensureVaultId', 'invalidateQmdAfterProjectionFailure', 'readQmdIndexStatus', 'recoverQmdIndex', 'reindexQmdVault'])
    assert.deepEqual(Object.keys(qmd).sort(), declared)
    const pkg = readJson(path.join(repoRoot, 'package.json'))
    assert.equal(pkg.exports['./qmd-indexing'].default, './qmd-indexing.js')
    assert.ok(pkg.files.includes('qmd-indexing.js') && pkg.files.includes('qmd-indexing.d.ts'))
    const err = new qmd.QmdIndexError('qmd_index_busy', 'busy')
    assert.ok(err instanceof Error)
    assert.equal(err.code, 'qmd_index_busy')
    assert.equal(err.name, 'QmdIndexError')
  })

  test('reindexQmdVault: the client result shape, the store under paths.qmd, status ready', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(2) })
    const p = clientPaths(v.root)
    const stages = []
    const r = await qmd.reindexQmdVault(p, { scope: 'changed', components: ['lexical'], onProgress: (s) => stages.push(s.stage) })
    assert.equal(r.ok, true, JSON.stringify(r.errors))
    for (const key of ['ok', 'vaultId', 'scope', 'components', 'documents', 'vectors', 'elapsedMs', 'status', 'warnings', 'errors']) {
      assert.ok(key in r, key)
    }
    assert.match(r.vaultId, UUID_V4)
    assert.deepEqual(r.documents, { indexed: 2, updated: 0, unchanged: 0, removed: 0 })
    assert.deepEqual(r.vectors, { generated: 0, skipped: 0, errors: 0 })
    assert.ok(stages.includes('lexical'), stages.join())
    // Where the client's status and lint look.
    assert.ok(fs.existsSync(path.join(p.qmd, 'CURRENT')))
    assert.ok(!fs.existsSync(path.join(p.meta, 'retrieval')))
    const status = await qmd.readQmdIndexStatus(p)
    assert.equal(status.state, 'ready')
    assert.equal(status.totalDocuments, 2)
    assert.deepEqual(status.repairComponents, [])
    // A store under a custom paths.qmd.
    const custom = { ...p, qmd: path.join(base, 'elsewhere', 'qmd') }
    assert.equal((await qmd.reindexQmdVault(custom, { scope: 'changed', components: ['lexical'] })).ok, true)
    assert.ok(fs.existsSync(path.join(custom.qmd, 'CURRENT')))
  })

  test('awaitQmdIndexQueue waits for the queued work of a vault; calls run one after another', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(3) })
    const p = clientPaths(v.root)
    const done = []
    const a = qmd.reindexQmdVault(p, { scope: 'changed', components: ['lexical'] }).then((r) => done.push(['a', r.ok]))
    const b = qmd.reindexQmdVault(p, { scope: 'all', components: ['lexical'], force: true }).then((r) => done.push(['b', r.ok]))
    await qmd.awaitQmdIndexQueue(v.root)
    assert.deepEqual(done, [['a', true], ['b', true]], 'queued, never busy against itself')
    await Promise.all([a, b])
    assert.equal(await qmd.awaitQmdIndexQueue(path.join(base, 'unknown')), undefined)
  })

  test('ensureVaultId backfills once and rejects with QmdIndexError codes, never touching the file', async () => {
    const v = makeVault(path.join(base, 'v'), { config: { topic: 'T', nested: { keep: true } } })
    const p = clientPaths(v.root)
    const id = await qmd.ensureVaultId(p)
    assert.match(id, UUID_V4)
    assert.equal(await qmd.ensureVaultId(p), id)
    assert.deepEqual(readJson(v.config), { topic: 'T', nested: { keep: true }, vault_id: id })
    for (const [text, code] of [['{broken', 'config_invalid'], ['[1,2]', 'config_invalid'], ['{"vault_id":"nope"}', 'config_invalid_vault_id']]) {
      fs.writeFileSync(v.config, text)
      await assert.rejects(qmd.ensureVaultId(p), (e) => e instanceof qmd.QmdIndexError && e.code === code)
      assert.equal(fs.readFileSync(v.config, 'utf8'), text)
    }
    fs.rmSync(v.config)
    await assert.rejects(qmd.ensureVaultId(p), (e) => e.code === 'config_invalid')
  })

  test('failures resolve ok:false with the client shape (config, cancellation), never reject', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(1) })
    const p = clientPaths(v.root)
    fs.writeFileSync(v.config, '{broken')
    const bad = await qmd.reindexQmdVault(p, { scope: 'changed', components: ['lexical'] })
    assert.equal(bad.ok, false)
    assert.equal(bad.errors[0].code, 'config_invalid')
    assert.equal(fs.readFileSync(v.config, 'utf8'), '{broken')
    fs.writeFileSync(v.config, '{}')
    const controller = new AbortController()
    controller.abort()
    const cancelled = await qmd.reindexQmdVault(p, { scope: 'changed', components: ['lexical'], signal: controller.signal })
    assert.equal(cancelled.ok, false)
    assert.deepEqual(cancelled.errors, [])
    const invalid = await qmd.reindexQmdVault(p, { scope: 'sometimes', components: ['lexical'] })
    assert.equal(invalid.ok, false)
    assert.equal(invalid.errors[0].code, 'invalid_argument')
    assert.equal(typeof invalid.status.state, 'string')
  })

  test('migration: start-up recovery migrates a QMD store (recall never goes empty); a failed run keeps it', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(2) })
    const p = clientPaths(v.root)
    const vaultId = await qmd.ensureVaultId(p)
    writeQmdStore(p, vaultId)
    fs.mkdirSync(path.join(p.qmd, 'custom-thing'))
    fs.writeFileSync(path.join(p.qmd, 'custom-thing', 'keep.txt'), 'x')
    const before = await qmd.readQmdIndexStatus(p)
    assert.equal(before.state, 'stale')
    assert.deepEqual(before.repairComponents, ['lexical'])

    // A failed migration (broken config) keeps the QMD store and reports why.
    const config = fs.readFileSync(v.config, 'utf8')
    fs.writeFileSync(v.config, '{broken')
    const failed = await qmd.recoverQmdIndex(p)
    assert.equal(failed.ok, false)
    assert.equal(failed.diagnostics[0].code, 'qmd_migration_pending')
    assert.ok(failed.diagnostics.length > 1, JSON.stringify(failed.diagnostics))
    assert.ok(fs.existsSync(path.join(p.qmdCurrent, 'index.sqlite')))
    assert.ok(fs.existsSync(p.qmdManifest))
    fs.writeFileSync(v.config, config)

    const rec = await qmd.recoverQmdIndex(p)
    assert.equal(rec.ok, true, JSON.stringify(rec.diagnostics))
    assert.deepEqual(rec.diagnostics.map((d) => d.code), ['qmd_migrated'])
    const after = await qmd.readQmdIndexStatus(p)
    assert.equal(after.state, 'ready')
    assert.equal(after.vaultId, vaultId, 'the vault keeps its identity')
    for (const n of ['current', 'documents', 'manifest.json']) assert.ok(!fs.existsSync(path.join(p.qmd, n)), n)
    assert.ok(fs.existsSync(path.join(p.qmd, 'custom-thing', 'keep.txt')), 'unknown files are left alone')
    assert.equal(storeDirs(p.qmd).length, 1)
  })

  test('a QMD store interrupted mid-swap is reported recovering with its phase; a malformed journal blocks migration', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(1) })
    const p = clientPaths(v.root)
    writeQmdStore(p, await qmd.ensureVaultId(p))
    fs.writeFileSync(path.join(p.qmd, 'swap.json'), JSON.stringify({ version: 1, operationId: 'op', stagingName: 'staging-00000000-0000-4000-8000-000000000000', phase: 'current-promoted', startedAt: 'x' }))
    const st = await qmd.readQmdIndexStatus(p)
    assert.equal(st.state, 'recovering')
    assert.equal(st.swapPhase, 'current-promoted')
    assert.deepEqual(st.repairComponents, [])
    fs.writeFileSync(path.join(p.qmd, 'swap.json'), '{"version":99}')
    const rec = await qmd.recoverQmdIndex(p)
    assert.deepEqual(rec.diagnostics.map((d) => d.code), ['qmd_migration_pending'], 'left for inspection')
    assert.ok(fs.existsSync(path.join(p.qmdCurrent, 'index.sqlite')))
  })

  test('a live lock of the TypeScript writer defers the migration: busy, deferred, lock and store untouched', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(1) })
    const p = clientPaths(v.root)
    writeQmdStore(p, await qmd.ensureVaultId(p))
    const owner = { pid: process.pid, hostname: os.hostname(), acquiredAt: new Date().toISOString() }
    const lock = qmdLock(p, owner)
    const r = await qmd.reindexQmdVault(p, { scope: 'changed', components: ['lexical'] })
    assert.equal(r.ok, false)
    assert.deepEqual(r.errors.map((e) => e.code), ['qmd_index_busy'])
    assert.deepEqual(r.warnings.map((w) => w.code), ['qmd_migration_deferred'])
    const rec = await qmd.recoverQmdIndex(p)
    assert.equal(rec.ok, false)
    assert.deepEqual(rec.diagnostics.map((d) => d.code), ['qmd_index_busy', 'qmd_migration_deferred'])
    assert.deepEqual(readJson(path.join(lock, 'owner.json')), owner)
    assert.ok(fs.existsSync(path.join(p.qmdCurrent, 'index.sqlite')))
    assert.ok(!fs.existsSync(path.join(p.qmd, 'CURRENT')))
  })

  test('recoverQmdIndex removes unfinished store directories and QMD staging, reports a broken store', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(1) })
    const p = clientPaths(v.root)
    assert.deepEqual(await qmd.recoverQmdIndex(p), { ok: true, diagnostics: [] }, 'nothing to recover')
    assert.equal((await qmd.reindexQmdVault(p, { scope: 'changed', components: ['lexical'] })).ok, true)
    const live = fs.readFileSync(path.join(p.qmd, 'CURRENT'), 'utf8').trim()
    fs.mkdirSync(path.join(p.qmd, 'store-00000000-0000-4000-8000-000000000000', 'lexical'), { recursive: true })
    fs.mkdirSync(path.join(p.qmd, 'staging-00000000-0000-4000-8000-000000000000'))
    assert.deepEqual(await qmd.recoverQmdIndex(p), { ok: true, diagnostics: [] })
    assert.deepEqual(fs.readdirSync(p.qmd).filter((n) => /^(store|staging)-/.test(n)), [live])
    fs.rmSync(path.join(p.qmd, live, 'lexical'), { recursive: true })
    const broken = await qmd.recoverQmdIndex(p)
    assert.equal(broken.ok, true)
    assert.deepEqual(broken.diagnostics.map((d) => [d.severity, d.code]), [['error', 'qmd_index_error']])
    assert.ok(fs.existsSync(path.join(p.qmd, live, 'state.json')), 'the live store is never deleted')
    assert.equal((await qmd.readQmdIndexStatus(p)).state, 'error')
  })

  test('invalidateQmdAfterProjectionFailure drops pages that are gone or no longer validate, indexes nothing, never rejects', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(3) })
    const p = clientPaths(v.root)
    assert.equal((await qmd.reindexQmdVault(p, { scope: 'changed', components: ['lexical'] })).ok, true)
    fs.writeFileSync(path.join(v.wiki, 'concepts', 'topic-1.md'), 'no frontmatter any more\n')
    fs.rmSync(path.join(v.wiki, 'concepts', 'topic-2.md'))
    // A valid addition and a valid edit: not indexed by the safety pass (the client's contract).
    fs.writeFileSync(path.join(v.wiki, 'concepts', 'added.md'), page({ title: 'Added', body: 'zqaddedvor' }))
    const before = fs.readFileSync(path.join(v.wiki, 'concepts', 'topic-0.md'), 'utf8')
    fs.writeFileSync(path.join(v.wiki, 'concepts', 'topic-0.md'), before.replace(/\n*$/, '\n\nzqeditedvor\n'))
    assert.equal(await qmd.invalidateQmdAfterProjectionFailure(p), undefined)
    assert.equal((await qmd.readQmdIndexStatus(p)).totalDocuments, 1)
    const ids = async (q) => (await addon.recallWiki({ root: v.root }, q, { policy: EXPLICIT, mode: 'lexical' })).results.map((r) => r.id)
    assert.deepEqual(await ids('zqaddedvor'), [], 'a valid addition was indexed')
    assert.deepEqual(await ids('zqeditedvor'), [], 'a valid edit was indexed')
    // The next ordinary reindex indexes them.
    assert.equal((await qmd.reindexQmdVault(p, { scope: 'changed', components: ['lexical'] })).ok, true)
    assert.deepEqual(await ids('zqaddedvor'), ['concepts/added'])
    assert.equal((await qmd.readQmdIndexStatus(p)).totalDocuments, 2)
    await qmd.invalidateQmdAfterProjectionFailure({ ...p, root: path.join(base, 'no-such-vault'), dotWiki: path.join(base, 'none') })
  })

  test('invalidateQmdAfterProjectionFailure never builds an index where none is published', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(2) })
    const p = clientPaths(v.root)
    assert.equal(await qmd.invalidateQmdAfterProjectionFailure(p), undefined)
    assert.ok(!fs.existsSync(path.join(p.qmd, 'CURRENT')))
    assert.equal((await qmd.readQmdIndexStatus(p)).state, 'missing')
  })

  test('the engine exports recoverIndex and ensureVaultId (typed in index.d.ts)', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: { 'concepts/a.md': page({ title: 'A', body: 'alpha' }) } })
    assert.match(await addon.ensureVaultId({ root: v.root }), UUID_V4)
    assert.deepEqual(await addon.recoverIndex({ root: v.root }), { ok: true, diagnostics: [] })
    await assert.rejects(addon.recoverIndex({ root: 'relative' }), (e) => e.code === 'invalid_argument')
  })
})
