// readIndexStatus: missing → ready → stale → ready transitions, pending page counts, the
// precedence of error / missing / stale, and that a status read writes nothing.
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { afterEach, beforeEach, describe, test } from 'node:test'

import {
  EXPLICIT,
  addon,
  editPage,
  makeTmp,
  makeVault,
  noPersonalVault,
  page,
  readJson,
  reindexOne,
  rmDir,
  topicPages,
  writePages,
} from './helpers.mjs'

const { readIndexStatus, engineInfo } = addon

let base
beforeEach(() => {
  base = makeTmp()
  noPersonalVault(base)
})
afterEach(() => rmDir(base))

async function indexedVault(n = 4) {
  const v = makeVault(path.join(base, 'v'), {
    pages: {
      ...topicPages(n),
      'sources/src-a.md': page({ type: 'source', title: 'Src A', body: 'Evidence zxsrcavor.' }),
    },
  })
  const r = await reindexOne(v.paths)
  assert.equal(r.ok, true, JSON.stringify(r.errors))
  return v
}

describe('lifecycle', () => {
  test('missing before the first index, and the status read creates nothing', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(3) })
    const configBefore = fs.readFileSync(v.config, 'utf8')
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'missing')
    assert.equal(s.totalDocuments, 0)
    assert.equal(s.totalChunks, 0)
    assert.deepEqual(s.repairComponents, [])
    assert.deepEqual(s.issues, [])
    assert.equal(s.vaultId, undefined)
    assert.equal(s.lastIndexedAt, undefined)
    assert.equal(s.qmdVersion, engineInfo().version)
    assert.equal(s.engineVersion, engineInfo().version)
    assert.equal(s.formatVersion, engineInfo().indexFormatVersion)
    assert.deepEqual(s.models.generate, '')
    assert.equal(fs.existsSync(path.join(v.dotWiki, 'meta')), false, 'status never creates the store')
    assert.equal(fs.readFileSync(v.config, 'utf8'), configBefore, 'status never backfills vault_id')
  })

  test('ready after indexing, with counts, identity and hashes', async () => {
    const v = await indexedVault(4)
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'ready', JSON.stringify(s.issues))
    assert.deepEqual(s.issues, [])
    assert.deepEqual(s.repairComponents, [])
    assert.equal(s.totalDocuments, 5)
    assert.equal(s.canonicalDocuments, 4)
    assert.equal(s.evidenceDocuments, 1)
    assert.ok(s.totalChunks >= 5)
    assert.equal(s.vaultId, readJson(v.config).vault_id)
    assert.ok(s.manifestHash, 'manifestHash present')
    assert.equal(s.manifestHash, s.indexedManifestHash)
    assert.ok(!Number.isNaN(Date.parse(s.lastIndexedAt)), s.lastIndexedAt)
    assert.deepEqual(s.pendingPages, { added: 0, changed: 0, removed: 0 })
    assert.equal(s.swapPhase, undefined)
  })

  test('stale after an edit / add / delete with qmd_index_stale and pending counts; ready after reindex', async () => {
    const v = await indexedVault(4)

    editPage(v, 'concepts/topic-0.md', page({ title: 'Topic 0', body: 'Changed body zxchangedvor.' }))
    let s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'stale')
    assert.ok(s.issues.some((i) => i.code === 'qmd_index_stale'), JSON.stringify(s.issues))
    assert.deepEqual(s.pendingPages, { added: 0, changed: 1, removed: 0 })
    assert.deepEqual(s.repairComponents, ['lexical'])
    assert.equal(s.totalDocuments, 5, 'counts describe the last good index')

    writePages(v, { 'concepts/extra.md': page({ title: 'Extra', body: 'zxextravor' }) })
    fs.rmSync(path.join(v.wiki, 'concepts/topic-1.md'))
    s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'stale')
    assert.deepEqual(s.pendingPages, { added: 1, changed: 1, removed: 1 })

    const noCheck = await readIndexStatus(v.paths, { checkPages: false })
    assert.equal(noCheck.state, 'ready', 'checkPages:false skips the page scan')
    assert.equal(noCheck.pendingPages, undefined)

    const r = await reindexOne(v.paths)
    assert.equal(r.ok, true)
    assert.equal(r.status.state, 'ready')
    s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'ready', JSON.stringify(s.issues))
    assert.deepEqual(s.pendingPages, { added: 0, changed: 0, removed: 0 })
    assert.equal(s.totalDocuments, 5)
  })

  test('a malformed page does not make the index stale', async () => {
    const v = await indexedVault(2)
    writePages(v, { 'concepts/broken.md': 'no frontmatter here\n' })
    const r = await reindexOne(v.paths)
    assert.equal(r.ok, true)
    assert.equal(r.warnings.filter((w) => w.code === 'frontmatter_missing').length, 1)
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'ready', JSON.stringify(s.issues))
    assert.equal(s.totalDocuments, 3)
  })
})

describe('precedence', () => {
  test('a malformed CURRENT means error; reindex publishes a new store and collects the old one', async () => {
    const v = await indexedVault(2)
    const old = v.current
    for (const bad of ['', 'store-nope\n', '../elsewhere\n']) {
      fs.writeFileSync(v.pointer, bad)
      const s = await readIndexStatus(v.paths)
      assert.equal(s.state, 'error', JSON.stringify(bad))
      assert.ok(s.issues.some((i) => i.code === 'qmd_index_error'), JSON.stringify(s.issues))
      assert.deepEqual(s.repairComponents, ['lexical'])
    }
    const r = await reindexOne(v.paths)
    assert.equal(r.ok, true, JSON.stringify(r.errors))
    assert.equal(r.fullRebuild, true)
    assert.equal(r.status.state, 'ready')
    assert.equal(r.status.totalDocuments, 3)
    assert.notEqual(v.current, old)
    assert.equal(fs.existsSync(old), false, 'the unreachable store directory was collected')
  })

  test('CURRENT naming a store directory that is gone means error; reindex rebuilds', async () => {
    const v = await indexedVault(2)
    fs.rmSync(v.current, { recursive: true })
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'error')
    assert.ok(s.issues.some((i) => i.code === 'qmd_index_error'), JSON.stringify(s.issues))
    const r = await reindexOne(v.paths)
    assert.equal(r.ok, true, JSON.stringify(r.errors))
    assert.equal(r.status.state, 'ready')
    assert.equal(r.status.totalDocuments, 3)
  })

  test('a format-1 store (current/, swap.json) is stale; reindex replaces it and removes the old layout', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(2) })
    fs.mkdirSync(path.join(v.store, 'current', 'lexical'), { recursive: true })
    fs.writeFileSync(path.join(v.store, 'current', 'state.json'), JSON.stringify({ version: 1, formatVersion: 1 }))
    fs.mkdirSync(path.join(v.store, `staging-${crypto.randomUUID()}`))
    fs.writeFileSync(path.join(v.store, 'swap.json'), '{}')
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'stale', JSON.stringify(s.issues))
    assert.deepEqual(s.repairComponents, ['lexical'])
    assert.equal(s.swapPhase, undefined)
    const rec = await addon.recallWiki(v.paths, 'anything', { policy: EXPLICIT, mode: 'lexical' })
    assert.deepEqual(rec.diagnostics.map((d) => d.code), ['qmd_index_stale'])
    const r = await reindexOne(v.paths)
    assert.equal(r.ok, true, JSON.stringify(r.errors))
    assert.equal(r.status.state, 'ready')
    const names = fs.readdirSync(v.store)
    for (const legacy of ['current', 'swap.json']) assert.ok(!names.includes(legacy), `${legacy} left: ${names}`)
    assert.ok(!names.some((n) => n.startsWith('staging-')), `${names}`)
  })

  test('a malformed state file means error with qmd_index_error', async () => {
    const v = await indexedVault(2)
    fs.writeFileSync(path.join(v.current, 'state.json'), '{broken')
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'error')
    assert.ok(s.issues.some((i) => i.code === 'qmd_index_error'), JSON.stringify(s.issues))
    assert.deepEqual(s.repairComponents, ['lexical'])
  })

  test('a state file without the lexical index means error', async () => {
    const v = await indexedVault(2)
    fs.rmSync(path.join(v.current, 'lexical'), { recursive: true })
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'error')
    assert.ok(s.issues.some((i) => i.code === 'qmd_index_error'))
    // A reindex rebuilds it.
    const r = await reindexOne(v.paths)
    assert.equal(r.ok, true, JSON.stringify(r.errors))
    assert.equal(r.status.state, 'ready')
    assert.equal(r.status.totalDocuments, 3)
  })

  test('a malformed config.json means error with qmd_config_invalid', async () => {
    const v = await indexedVault(2)
    fs.writeFileSync(v.config, '{oops')
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'error')
    assert.ok(s.issues.some((i) => i.code === 'qmd_config_invalid'), JSON.stringify(s.issues))
  })

  test('a config without vault_id after indexing means error (identity cannot be confirmed)', async () => {
    const v = await indexedVault(2)
    fs.writeFileSync(v.config, JSON.stringify({ name: 'no id' }))
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'error')
    assert.ok(s.issues.some((i) => i.code === 'qmd_config_invalid'))
  })

  test('a changed vault identity makes the index stale; reindex rebuilds it for the new identity', async () => {
    const v = await indexedVault(2)
    const cfg = readJson(v.config)
    const newId = crypto.randomUUID()
    fs.writeFileSync(v.config, JSON.stringify({ ...cfg, vault_id: newId }))
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'stale')
    assert.ok(s.issues.some((i) => i.code === 'qmd_index_stale'))
    assert.equal(s.vaultId, newId)
    const r = await reindexOne(v.paths)
    assert.equal(r.ok, true, JSON.stringify(r.errors))
    assert.equal(r.vaultId, newId)
    assert.equal(r.fullRebuild, true)
    assert.equal(r.status.state, 'ready')
    assert.equal(r.status.totalDocuments, 3)
  })

  test('a recorded failed attempt (last-error.json) makes an index stale; a reindex clears it', async () => {
    const v = await indexedVault(2)
    fs.writeFileSync(v.lastError, JSON.stringify({ code: 'qmd_index_error', message: 'disk full', at: new Date().toISOString() }))
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'stale')
    assert.ok(s.issues.some((i) => i.code === 'qmd_index_error' && i.message === 'disk full'), JSON.stringify(s.issues))
    const r = await reindexOne(v.paths)
    assert.equal(r.ok, true)
    assert.equal(fs.existsSync(v.lastError), false)
    assert.equal(r.status.state, 'ready')
  })

  test('last-error.json without any index means error', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(1) })
    fs.mkdirSync(v.store, { recursive: true })
    fs.writeFileSync(v.lastError, JSON.stringify({ code: 'qmd_index_error', message: 'boom' }))
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'error')
    assert.ok(s.issues.some((i) => i.code === 'qmd_index_error'))
  })

  test('relative paths reject with invalid_argument', async () => {
    await assert.rejects(readIndexStatus({ root: 'rel/path' }), (e) => e.code === 'invalid_argument')
  })
})
