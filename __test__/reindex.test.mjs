// reindexWiki: vault identity backfill, document counts of cold / incremental / forced runs,
// vault targets and labels, argument validation, components and progress events.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { afterEach, beforeEach, describe, test } from 'node:test'

import {
  UUID_V4,
  addon,
  currentStoreDir,
  editPage,
  makeTmp,
  makeVault,
  noPersonalVault,
  page,
  readJson,
  recallIds,
  reindexOne,
  rmDir,
  setWikiHome,
  tmpDir,
  topicPages,
  uniqueWord,
  vaultInfo,
  writePages,
} from './helpers.mjs'

const { reindexWiki } = addon

let base
beforeEach(() => {
  base = makeTmp()
  noPersonalVault(base)
})
afterEach(() => rmDir(base))

describe('vault identity', () => {
  test('first reindex backfills a v4 vault_id and keeps every other config key in order', async () => {
    const v = makeVault(path.join(base, 'v'), {
      config: { name: 'X', mode: 'research', nested: { a: [1, 2] }, knowledge_format: 'okf-0.2' },
      pages: topicPages(2),
    })
    const r = await reindexOne(v.paths)
    assert.equal(r.ok, true, JSON.stringify(r.errors))
    const cfg = readJson(v.config)
    assert.match(cfg.vault_id, UUID_V4)
    assert.deepEqual(Object.keys(cfg), ['name', 'mode', 'nested', 'knowledge_format', 'vault_id'])
    assert.deepEqual(cfg.nested, { a: [1, 2] })
    assert.equal(cfg.name, 'X')
    assert.equal(r.vaultId, cfg.vault_id)
    assert.equal(r.status.vaultId, cfg.vault_id)
    // Pretty JSON without a trailing newline, like the extension.
    const text = fs.readFileSync(v.config, 'utf8')
    assert.ok(text.startsWith('{\n  "name": "X",'), text)
    assert.ok(!text.endsWith('\n'))

    const again = await reindexOne(v.paths)
    assert.equal(again.ok, true)
    assert.equal(readJson(v.config).vault_id, cfg.vault_id, 'vault_id is stable across reindexes')
    assert.equal(again.vaultId, cfg.vault_id)
  })

  test('an existing vault_id is kept and the config file is not rewritten', async () => {
    const id = '123e4567-e89b-42d3-a456-426614174000'
    const v = makeVault(path.join(base, 'v'), { config: { vault_id: id, name: 'Y' }, pages: topicPages(1) })
    const before = fs.readFileSync(v.config, 'utf8')
    const r = await reindexOne(v.paths)
    assert.equal(r.ok, true)
    assert.equal(r.vaultId, id)
    assert.equal(fs.readFileSync(v.config, 'utf8'), before)
  })

  test('an invalid vault_id fails with config_invalid_vault_id and leaves config.json untouched', async () => {
    const v = makeVault(path.join(base, 'v'), { config: { vault_id: 'not-a-uuid' }, pages: topicPages(1) })
    const before = fs.readFileSync(v.config, 'utf8')
    const r = await reindexOne(v.paths)
    assert.equal(r.ok, false)
    assert.equal(r.errors[0].code, 'config_invalid_vault_id')
    assert.equal(r.vaultId, undefined)
    assert.equal(fs.readFileSync(v.config, 'utf8'), before)
  })

  test('a config.json that is not a JSON object fails with config_invalid and is not rewritten', async () => {
    for (const raw of ['[1, 2]', '{not json']) {
      const v = makeVault(fs.mkdtempSync(path.join(base, 'v')), { config: raw, pages: topicPages(1) })
      const r = await reindexOne(v.paths)
      assert.equal(r.ok, false, raw)
      assert.equal(r.errors[0].code, 'config_invalid', raw)
      assert.equal(fs.readFileSync(v.config, 'utf8'), raw)
    }
  })

  test('a directory without a vault or with an unknown knowledge_format is blocked', async () => {
    const empty = path.join(base, 'empty')
    fs.mkdirSync(empty)
    const r1 = await reindexOne({ root: empty })
    assert.equal(r1.ok, false)
    assert.equal(r1.errors[0].code, 'config_invalid_knowledge_format')
    assert.equal(r1.status.state, 'error')
    assert.equal(fs.existsSync(path.join(empty, '.llm-wiki')), false, 'nothing is created in a non-vault')

    const v = makeVault(path.join(base, 'fmt'), { config: { knowledge_format: 'okf-9' }, pages: topicPages(1) })
    const r2 = await reindexOne(v.paths)
    assert.equal(r2.ok, false)
    assert.equal(r2.errors[0].code, 'config_invalid_knowledge_format')
    assert.equal(fs.existsSync(v.store), false)
  })
})

describe('document counts', () => {
  test('cold build, no-op, add/update/delete, metadata-only touch and forced rebuild', async () => {
    const v = makeVault(path.join(base, 'v'), {
      pages: {
        ...topicPages(5),
        'sources/evidence-one.md': page({ type: 'source', title: 'Evidence one', body: 'Observed zxevidencevor.' }),
      },
    })
    const cold = await reindexOne(v.paths)
    assert.equal(cold.ok, true, JSON.stringify(cold.errors))
    assert.equal(cold.fullRebuild, true)
    assert.equal(cold.generation, 1)
    assert.deepEqual(cold.documents, { indexed: 6, updated: 0, unchanged: 0, removed: 0 })
    assert.deepEqual(cold.components, ['lexical'])
    assert.equal(cold.scope, 'changed')
    assert.deepEqual(cold.errors, [])
    assert.equal(cold.status.state, 'ready')
    assert.equal(cold.status.totalDocuments, 6)
    assert.equal(cold.status.canonicalDocuments, 5)
    assert.equal(cold.status.evidenceDocuments, 1)
    assert.ok(cold.chunks.total >= 6, `chunks.total ${cold.chunks.total}`)
    assert.equal(cold.chunks.added, cold.chunks.total)
    assert.equal(cold.status.totalChunks, cold.chunks.total)
    assert.ok(cold.elapsedMs >= 0)

    const noop = await reindexOne(v.paths)
    assert.equal(noop.ok, true)
    assert.equal(noop.fullRebuild, false)
    assert.deepEqual(noop.documents, { indexed: 0, updated: 0, unchanged: 6, removed: 0 })
    assert.equal(noop.generation, 1, 'a no-op commits nothing')
    assert.equal(noop.status.state, 'ready')

    editPage(v, 'concepts/topic-1.md', page({ title: 'Topic 1', body: 'Rewritten with zxrewrittenvor.' }))
    writePages(v, { 'concepts/new-one.md': page({ title: 'New one', body: 'Fresh zxfreshvor.' }) })
    fs.rmSync(path.join(v.wiki, 'concepts/topic-2.md'))
    const inc = await reindexOne(v.paths)
    assert.equal(inc.ok, true, JSON.stringify(inc.errors))
    assert.equal(inc.fullRebuild, false)
    assert.deepEqual(inc.documents, { indexed: 1, updated: 1, unchanged: 4, removed: 1 })
    assert.equal(inc.generation, 2)
    assert.equal(inc.status.state, 'ready')
    assert.equal(inc.status.totalDocuments, 6)
    assert.deepEqual(await recallIds(v.paths, 'zxrewrittenvor'), ['concepts/topic-1'])
    assert.deepEqual(await recallIds(v.paths, uniqueWord(1)), [], 'old content of an updated page is gone')
    assert.deepEqual(await recallIds(v.paths, 'zxfreshvor'), ['concepts/new-one'])
    assert.deepEqual(await recallIds(v.paths, uniqueWord(2)), [], 'a deleted page is gone')

    // Same bytes, later mtime: re-hashed, counted unchanged.
    const f = path.join(v.wiki, 'concepts/topic-3.md')
    const later = new Date(Date.now() + 20_000)
    fs.utimesSync(f, later, later)
    const touched = await reindexOne(v.paths)
    assert.equal(touched.ok, true)
    assert.deepEqual(touched.documents, { indexed: 0, updated: 0, unchanged: 6, removed: 0 })
    assert.equal(touched.status.state, 'ready')

    const all = await reindexOne(v.paths, { scope: 'all' })
    assert.equal(all.ok, true)
    assert.equal(all.scope, 'all')
    assert.deepEqual(all.documents, { indexed: 0, updated: 0, unchanged: 6, removed: 0 })

    const forced = await reindexOne(v.paths, { force: true })
    assert.equal(forced.ok, true, JSON.stringify(forced.errors))
    assert.equal(forced.fullRebuild, true)
    assert.deepEqual(forced.documents, { indexed: 6, updated: 0, unchanged: 0, removed: 0 })
    assert.equal(forced.status.state, 'ready')
    assert.equal(forced.status.totalDocuments, 6)
    assert.deepEqual(await recallIds(v.paths, 'zxfreshvor'), ['concepts/new-one'])
    assert.deepEqual(await recallIds(v.paths, uniqueWord(4)), ['concepts/topic-4'])
  })

  test('scope "all" detects a content change that kept size and mtime', async () => {
    const v = makeVault(path.join(base, 'v'), {
      pages: { 'concepts/same.md': page({ title: 'Same', body: 'Word zxaaaavor here.' }) },
    })
    assert.equal((await reindexOne(v.paths)).ok, true)
    const f = path.join(v.wiki, 'concepts/same.md')
    // An mtime well before the last build (outside the racy window), in whole seconds so it
    // can be restored exactly.
    const old = Math.floor(Date.now() / 1000) - 60
    fs.utimesSync(f, old, old)
    assert.equal((await reindexOne(v.paths)).ok, true)
    const size = fs.statSync(f).size
    fs.writeFileSync(f, page({ title: 'Same', body: 'Word zxbbbbvor here.' }))
    fs.utimesSync(f, old, old)
    assert.equal(fs.statSync(f).size, size)

    const changed = await reindexOne(v.paths, { scope: 'changed' })
    assert.equal(changed.ok, true)
    assert.equal(changed.documents.updated, 0, 'scope "changed" trusts size + mtime')
    const all = await reindexOne(v.paths, { scope: 'all' })
    assert.equal(all.ok, true)
    assert.equal(all.documents.updated, 1, 'scope "all" re-hashes every page')
    assert.deepEqual(await recallIds(v.paths, 'zxbbbbvor'), ['concepts/same'])
  })

  test('an explicit thread count works', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(30) })
    const r = await reindexOne(v.paths, { threads: 1 })
    assert.equal(r.ok, true, JSON.stringify(r.errors))
    assert.equal(r.status.totalDocuments, 30)
  })

  test('components are de-duplicated in input order', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(1) })
    const r = await reindexOne(v.paths, { components: ['lexical', 'lexical'] })
    assert.equal(r.ok, true)
    assert.deepEqual(r.components, ['lexical'])
  })

  test('components ["vectors"] reports the dense engine as unavailable or generates vectors', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(3) })
    const r = await reindexOne(v.paths, { components: ['vectors'] })
    assert.deepEqual(r.components, ['vectors'])
    assert.deepEqual(r.errors, [])
    assert.equal(r.ok, true)
    const unavailable = r.warnings.some((w) => w.code === 'vectors_unavailable')
    assert.ok(unavailable || r.vectors.generated >= 0, JSON.stringify(r.warnings))
    if (!unavailable) assert.equal(r.vectors.errors, 0)
    assert.equal(typeof r.vectors.generated, 'number')
    assert.equal(typeof r.vectors.skipped, 'number')

    const both = await addon.reindexWiki(v.paths, {})
    const res = both.results[0].result
    assert.equal(res.ok, true)
    assert.deepEqual(res.components, ['lexical', 'vectors'], 'default components')
  })

  test('legacy layout: pages under <root>/wiki, index under <root>/meta/qmd', async () => {
    const root = path.join(base, 'legacy')
    fs.mkdirSync(path.join(root, '.wiki'), { recursive: true })
    fs.writeFileSync(path.join(root, '.wiki', 'config.json'), JSON.stringify({ name: 'Legacy' }))
    fs.mkdirSync(path.join(root, 'wiki', 'concepts'), { recursive: true })
    fs.writeFileSync(path.join(root, 'wiki', 'concepts', 'old.md'), page({ title: 'Old', body: 'zxlegacyvor' }))
    const r = await reindexOne({ root })
    assert.equal(r.ok, true, JSON.stringify(r.errors))
    assert.equal(r.status.totalDocuments, 1)
    assert.ok(fs.existsSync(path.join(currentStoreDir(path.join(root, 'meta', 'qmd')), 'state.json')))
    assert.match(readJson(path.join(root, '.wiki', 'config.json')).vault_id, UUID_V4)
    const rec = await addon.recallWiki({ root }, 'zxlegacyvor', {
      policy: { includePersonal: false, minScore: 0.25, maxPerVault: 10, maxResults: 5 },
    })
    assert.deepEqual(
      rec.results.map((x) => x.path),
      [path.join(root, 'wiki', 'concepts', 'old.md')],
    )
  })
})

describe('vault targets', () => {
  test('active / project / personal / all resolve to the right roots and labels', async () => {
    const personal = makeVault(path.join(base, 'home'), { pages: topicPages(2, { salt: 'p' }) })
    const project = makeVault(path.join(base, 'project'), { pages: topicPages(3) })
    setWikiHome(personal.root)

    const active = await reindexWiki(project.paths, { components: ['lexical'] })
    assert.equal(active.vault, 'active')
    assert.deepEqual(
      active.results.map((r) => [r.root, r.label, r.result.ok]),
      [[project.root, 'active', true]],
    )

    const proj = await reindexWiki(project.paths, { vault: 'project', components: ['lexical'] })
    assert.equal(proj.vault, 'project')
    assert.deepEqual(proj.results.map((r) => [r.root, r.label]), [[project.root, 'project']])

    const pers = await reindexWiki(project.paths, { vault: 'personal', components: ['lexical'] })
    assert.equal(pers.vault, 'personal')
    assert.deepEqual(pers.results.map((r) => [r.root, r.label, r.result.ok]), [[personal.root, 'personal', true]])
    assert.equal(pers.results[0].result.status.totalDocuments, 2)

    const all = await reindexWiki(project.paths, { vault: 'all', components: ['lexical'] })
    assert.equal(all.vault, 'all')
    assert.deepEqual(
      all.results.map((r) => [r.root, r.label, r.result.ok]),
      [
        [project.root, 'project', true],
        [personal.root, 'personal', true],
      ],
    )
    assert.equal(all.results[0].result.status.totalDocuments, 3)
    assert.equal(all.results[1].result.status.totalDocuments, 2)
  })

  test('when the active vault is the personal vault: label personal, project empty, all de-duplicated', async () => {
    const personal = makeVault(path.join(base, 'home'), { pages: topicPages(2) })
    setWikiHome(personal.root)

    const active = await reindexWiki(personal.paths, { components: ['lexical'] })
    assert.deepEqual(active.results.map((r) => [r.root, r.label]), [[personal.root, 'personal']])
    assert.equal(active.results[0].result.ok, true)

    const proj = await reindexWiki(personal.paths, { vault: 'project', components: ['lexical'] })
    assert.deepEqual(proj, { vault: 'project', results: [] })

    const all = await reindexWiki(personal.paths, { vault: 'all', components: ['lexical'] })
    assert.deepEqual(all.results.map((r) => [r.root, r.label]), [[personal.root, 'personal']])

    // The personal vault reached through a symlink is still the personal vault.
    const link = path.join(base, 'home-link')
    fs.symlinkSync(personal.root, link)
    const viaLink = await reindexWiki({ root: link }, { components: ['lexical'] })
    assert.deepEqual(viaLink.results.map((r) => r.label), ['personal'])
    assert.equal(viaLink.results[0].result.ok, true)
  })

  test('a personal target without a personal vault is reported, not thrown', async () => {
    const project = makeVault(path.join(base, 'project'), { pages: topicPages(1) })
    const missingHome = noPersonalVault(base)
    const r = await reindexWiki(project.paths, { vault: 'all', components: ['lexical'] })
    assert.deepEqual(r.results.map((x) => [x.root, x.label]), [
      [project.root, 'project'],
      [missingHome, 'personal'],
    ])
    assert.equal(r.results[0].result.ok, true, 'one failing vault does not stop the others')
    assert.equal(r.results[1].result.ok, false)
    assert.equal(r.results[1].result.errors[0].code, 'config_invalid_knowledge_format')
    assert.equal(fs.existsSync(missingHome), false, 'nothing is created for a missing personal vault')
  })
})

describe('argument validation', () => {
  const cases = [
    ['relative root', { root: 'relative/vault' }, {}],
    ['empty root', { root: '' }, {}],
    ['root with ..', null, {}],
    ['unknown scope', null, { scope: 'some' }],
    ['unknown vault', null, { vault: 'everything' }],
    ['unknown component', null, { components: ['lexical', 'graph'] }],
    ['empty components', null, { components: [] }],
  ]
  for (const [name, paths, input] of cases) {
    test(`${name} rejects with invalid_argument`, async () => {
      const v = makeVault(path.join(base, 'v'), { pages: topicPages(1) })
      const p = paths ?? (name === 'root with ..' ? { root: `${v.root}/../v` } : v.paths)
      await assert.rejects(reindexWiki(p, input), (err) => {
        assert.equal(err.code, 'invalid_argument', `${err.code}: ${err.message}`)
        return true
      })
      assert.equal(fs.existsSync(v.store), false, 'nothing was indexed')
    })
  }

  test('a wrongly typed argument rejects (never throws synchronously)', async () => {
    let p
    assert.doesNotThrow(() => {
      p = reindexWiki(null)
    })
    await assert.rejects(p)
    assert.doesNotThrow(() => {
      p = reindexWiki({ root: 42 })
    })
    await assert.rejects(p)
  })
})

describe('progress events', () => {
  test('events carry the vault root and a known stage; cold builds go through copy, validate and swap', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(20) })
    const events = []
    const r = await reindexWiki(v.paths, { components: ['lexical'], onProgress: (e) => events.push(e) })
    assert.equal(r.results[0].result.ok, true)
    // Let queued (non-blocking) progress calls drain.
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.ok(events.length > 0)
    const stages = new Set(['mirror', 'copy', 'lexical', 'vectors', 'validate', 'swap'])
    for (const e of events) {
      assert.equal(e.vault, v.root)
      assert.ok(stages.has(e.progress.stage), e.progress.stage)
      assert.equal(typeof e.progress.message, 'string')
      if (e.progress.current !== undefined && e.progress.total !== undefined) {
        assert.ok(e.progress.current <= e.progress.total, JSON.stringify(e.progress))
      }
    }
    const seen = new Set(events.map((e) => e.progress.stage))
    for (const s of ['mirror', 'copy', 'lexical', 'validate', 'swap']) assert.ok(seen.has(s), `stage ${s} missing`)
    const lexicalDone = events.filter((e) => e.progress.stage === 'lexical').at(-1)
    assert.deepEqual([lexicalDone.progress.current, lexicalDone.progress.total], [20, 20])
  })
})

test('vaultInfo helper matches the layout the engine uses', async (t) => {
  const root = tmpDir(t)
  noPersonalVault(root)
  const v = makeVault(path.join(root, 'v'), { pages: topicPages(1) })
  assert.equal((await reindexOne(v.paths)).ok, true)
  assert.ok(fs.existsSync(path.join(vaultInfo(v.root).current, 'state.json')))
  assert.equal(fs.existsSync(v.lockDir), false, 'the lock is released after a reindex')
})
