// Crash recovery: a child CLI reindex kills itself (SIGKILL, LLM_WIKI_CRASH_AT) at every crash
// point of the incremental, the full-rebuild (new store directory published by replacing CURRENT)
// and the vector paths. Right after the crash the status is asserted exactly and recall answers
// from a whole generation (never "recovering", never an empty store); then an in-process reindex
// must recover with no page lost and no leftover (lock marker, unpublished store directory).
// Also a staged store refused by its count validation (LLM_WIKI_FAULT_AT). The crash points and
// the fault exist only in builds with the test-hooks cargo feature (`npm test`);
// elsewhere these tests are skipped.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { afterEach, beforeEach, describe as nodeDescribe, test as nodeTest } from 'node:test'

import {
  AUTOMATIC,
  EXPLICIT,
  NEEDS_HOOKS,
  addon,
  editPage,
  makeTmp,
  makeVault,
  noPersonalVault,
  page,
  readJson,
  recallIds,
  reindexAfterHolderDied,
  reindexOne,
  repoRoot,
  rmDir,
  runCli,
  storeDirs,
  topicPages,
  uniqueWord,
  writePages,
} from './helpers.mjs'

const { readIndexStatus, recallWiki } = addon
const describe = NEEDS_HOOKS ? nodeDescribe.skip : nodeDescribe
const test = NEEDS_HOOKS ? nodeTest.skip : nodeTest

let base
let wikiHome
beforeEach(() => {
  base = makeTmp()
  wikiHome = noPersonalVault(base)
})
afterEach(() => rmDir(base))

const INITIAL = 8 // topic-0 .. topic-7
const FINAL = 9 // topic-0 edited, topic-7 deleted, two pages added

/** The changes a crashing reindex was about to index: 1 edit, 2 additions, 1 deletion. */
function mutate(v) {
  editPage(v, 'concepts/topic-0.md', page({ title: 'Topic 0', body: '# Edited\n\nNow about zxeditedvor only.' }))
  writePages(v, {
    'concepts/added-one.md': page({ title: 'Added one', body: 'zxaddedonevor' }),
    'sources/added-two.md': page({ type: 'source', title: 'Added two', body: 'zxaddedtwovor' }),
  })
  fs.rmSync(path.join(v.wiki, 'concepts/topic-7.md'))
}

/** Every page of the final vault, found by its own word; removed content is not found. */
async function assertNoPageLost(v) {
  const expected = [
    ['zxeditedvor', 'concepts/topic-0'],
    ['zxaddedonevor', 'concepts/added-one'],
    ['zxaddedtwovor', 'sources/added-two'],
  ]
  for (let i = 1; i <= 6; i++) expected.push([uniqueWord(i), `concepts/topic-${i}`])
  assert.equal(expected.length, FINAL)
  for (const [word, id] of expected) {
    assert.deepEqual(await recallIds(v.paths, word), [id], `recall ${word}`)
  }
  assert.deepEqual(await recallIds(v.paths, uniqueWord(0)), [], 'old content of the edited page')
  assert.deepEqual(await recallIds(v.paths, uniqueWord(7)), [], 'the deleted page')
}

/** No lock marker and exactly one store directory, the one CURRENT names (no format-1 leftovers). */
function assertClean(v) {
  const names = fs.readdirSync(v.store).sort()
  assert.ok(!names.includes('index.lock'), `lock left: ${names}`)
  for (const legacy of ['swap.json', 'previous', 'current']) assert.ok(!names.includes(legacy), `${legacy} left: ${names}`)
  assert.deepEqual(storeDirs(v.store), [path.basename(v.current)], `store directories: ${names}`)
  assert.ok(fs.existsSync(path.join(v.current, 'state.json')))
}

async function crashChild(v, point, { force = false, component = 'lexical', env = {} } = {}) {
  const args = ['index', v.root, '--component', component]
  if (force) args.push('--force')
  return runCli(args, { env: { ...env, LLM_WIKI_CRASH_AT: point, WIKI_HOME: wikiHome } })
}

function assertKilled(child, point) {
  assert.equal(child.signal, 'SIGKILL', `child should be killed at ${point}: code ${child.code}\n${child.stderr}`)
  assert.equal(child.code, null)
  assert.ok(child.stderr.includes(`LLM_WIKI_CRASH_AT=${point}`), child.stderr)
}

/** The killed child still owns the cross-process lock. */
function assertLockOwnedBy(v, pid) {
  const owner = readJson(path.join(v.lockDir, 'owner.json'))
  assert.equal(owner.pid, pid)
  assert.equal(typeof owner.hostname, 'string')
  assert.ok(!Number.isNaN(Date.parse(owner.acquiredAt)))
}

/** Recall right after a crash answers from the generation the status reports, whole. */
async function assertRecallAnswersFrom(v, generation) {
  const present = generation === 'old' ? uniqueWord(3) : 'zxaddedonevor'
  const absent = generation === 'old' ? 'zxaddedonevor' : uniqueWord(7)
  const expected = generation === 'old' ? 'concepts/topic-3' : 'concepts/added-one'
  assert.deepEqual(await recallIds(v.paths, present), [expected], `${generation} generation answers`)
  assert.deepEqual(await recallIds(v.paths, absent), [], 'nothing of the other generation')
}

async function recoverAndCheck(v) {
  const r = await reindexAfterHolderDied(v.paths)
  assert.equal(r.ok, true, JSON.stringify(r.errors))
  assert.deepEqual(r.errors, [])
  assert.equal(r.status.state, 'ready', JSON.stringify(r.status.issues))
  assert.equal(r.status.totalDocuments, FINAL)
  const s = await readIndexStatus(v.paths)
  assert.equal(s.state, 'ready', JSON.stringify(s.issues))
  assert.equal(s.totalDocuments, FINAL)
  assert.deepEqual(s.pendingPages, { added: 0, changed: 0, removed: 0 })
  assertClean(v)
  await assertNoPageLost(v)
  return r
}

async function indexedVault() {
  const v = makeVault(path.join(base, 'v'), { pages: topicPages(INITIAL) })
  const r = await reindexOne(v.paths)
  assert.equal(r.ok, true, JSON.stringify(r.errors))
  assert.equal(r.status.totalDocuments, INITIAL)
  return v
}

describe('incremental path (existing index, changed pages)', () => {
  const cases = [
    // point, state right after the crash, documents the status reports
    // the manifest journal record of the next generation is written and fsynced, not committed
    ['after-manifest', 'stale', INITIAL],
    ['before-commit', 'stale', INITIAL],
    ['after-commit', 'stale', INITIAL],
    ['after-state', 'ready', FINAL],
  ]
  for (const [point, state, docs] of cases) {
    test(`killed at ${point}`, async () => {
      const v = await indexedVault()
      mutate(v)
      const child = await crashChild(v, point)
      assertKilled(child, point)
      assertLockOwnedBy(v, child.pid)

      const s = await readIndexStatus(v.paths)
      assert.equal(s.state, state, JSON.stringify(s.issues))
      assert.equal(s.totalDocuments, docs)
      if (state === 'stale') {
        assert.ok(s.issues.some((i) => i.code === 'qmd_index_stale'), JSON.stringify(s.issues))
        assert.deepEqual(s.pendingPages, { added: 2, changed: 1, removed: 1 })
      } else {
        assert.deepEqual(s.issues, [])
      }

      const r = await recoverAndCheck(v)
      assert.equal(r.fullRebuild, false, 'an incremental crash needs no rebuild')
    })
  }
})

describe('full rebuild path (--force over an existing index)', () => {
  const cases = [
    // point, state, documents the status reports, generation recall answers from, store dirs left
    ['before-swap', 'stale', INITIAL, 'old', 2],
    ['after-swap', 'ready', FINAL, 'new', 2],
  ]
  for (const [point, state, docs, generation, dirs] of cases) {
    test(`killed at ${point}`, async () => {
      const v = await indexedVault()
      mutate(v)
      const child = await crashChild(v, point, { force: true })
      assertKilled(child, point)
      assertLockOwnedBy(v, child.pid)

      const s = await readIndexStatus(v.paths)
      assert.equal(s.state, state, JSON.stringify(s.issues))
      assert.equal(s.swapPhase, undefined)
      assert.equal(s.totalDocuments, docs)
      if (state === 'stale') assert.ok(s.issues.some((i) => i.code === 'qmd_index_stale'), JSON.stringify(s.issues))
      else assert.deepEqual(s.issues, [])
      assert.equal(storeDirs(v.store).length, dirs, 'the other store directory is left behind')
      await assertRecallAnswersFrom(v, generation)
      // Automatic recall is as usable as explicit recall (no vault is skipped).
      const automatic = await recallWiki(v.paths, uniqueWord(5), { policy: AUTOMATIC, mode: 'lexical' })
      assert.deepEqual(automatic.diagnostics, [])

      await recoverAndCheck(v)
    })
  }
})

describe('full rebuild path (first index)', () => {
  async function finalVault() {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(INITIAL) })
    mutate(v)
    return v
  }

  test('killed at before-swap: no store is published (missing), the unfinished one is removed later', async () => {
    const v = await finalVault()
    const child = await crashChild(v, 'before-swap')
    assertKilled(child, 'before-swap')
    assertLockOwnedBy(v, child.pid)
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'missing', JSON.stringify(s.issues))
    assert.equal(s.totalDocuments, 0)
    assert.equal(storeDirs(v.store).length, 1)
    const explicit = await recallWiki(v.paths, 'zxaddedonevor', { policy: EXPLICIT, mode: 'lexical' })
    assert.deepEqual(explicit.results, [])
    assert.deepEqual(explicit.diagnostics.map((d) => d.code), ['qmd_index_missing'])
    await recoverAndCheck(v)
  })

  test('killed at after-swap: the published store is ready', async () => {
    const v = await finalVault()
    const child = await crashChild(v, 'after-swap')
    assertKilled(child, 'after-swap')
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'ready', JSON.stringify(s.issues))
    assert.equal(s.totalDocuments, FINAL)
    await assertRecallAnswersFrom(v, 'new')
    await recoverAndCheck(v)
  })
})

// The staged store's counts are validated before it is published (store/generation.rs: "index
// holds N documents but the manifest accounts for M"). LLM_WIKI_FAULT_AT=staged-manifest-short
// (test-hooks builds) makes a full rebuild's staged manifest lose a page between the commit and
// that validation.
test('a staged store whose index and manifest counts disagree is refused: the old store keeps serving, no staged directory survives recovery', async () => {
  const v = await indexedVault()
  const published = path.basename(v.current)
  const before = readJson(path.join(v.current, 'state.json'))
  process.env.LLM_WIKI_FAULT_AT = 'staged-manifest-short'
  let r
  try {
    r = await reindexOne(v.paths, { force: true })
  } finally {
    delete process.env.LLM_WIKI_FAULT_AT
  }
  assert.equal(r.ok, false, 'the mismatched store was published')
  assert.equal(r.errors.length, 1, JSON.stringify(r.errors))
  assert.equal(r.errors[0].code, 'qmd_index_error')
  const [, n, m] = r.errors[0].message.match(/index holds (\d+) documents but the manifest accounts for (\d+)/) || []
  assert.ok(n && Number(m) < Number(n), r.errors[0].message)
  assert.equal(path.basename(v.current), published)
  assert.deepEqual(readJson(path.join(v.current, 'state.json')), before, 'the published store was touched')
  assert.deepEqual(storeDirs(v.store), [published], 'the staged store directory remains')
  await assertRecallAnswersFrom(v, 'old')
  assert.equal((await recallIds(v.paths, uniqueWord(5))).length, 1)
  const recovered = await addon.recoverIndex(v.paths)
  assert.equal(recovered.ok, true, JSON.stringify(recovered.diagnostics))
  assertClean(v)
  // The fault is the variable's only: the next forced rebuild publishes.
  const again = await reindexOne(v.paths, { force: true })
  assert.equal(again.ok, true, JSON.stringify(again.errors))
  assert.equal(again.fullRebuild, true)
  assertClean(v)
})

test('a crash point of the other path is inert (incremental run with a full-rebuild point)', async () => {
  const v = await indexedVault()
  mutate(v)
  const child = await crashChild(v, 'before-swap')
  assert.equal(child.code, 0, child.stderr)
  assert.equal(child.signal, null)
  const s = await readIndexStatus(v.paths)
  assert.equal(s.state, 'ready', JSON.stringify(s.issues))
  assert.equal(s.totalDocuments, FINAL)
  await assertNoPageLost(v)
})

test('two crashes in a row (before, then after the swap) still lose nothing', async () => {
  const v = await indexedVault()
  mutate(v)
  assertKilled(await crashChild(v, 'before-swap', { force: true }), 'before-swap')
  // The second run collects the first one's unfinished directory, then crashes after its swap.
  assertKilled(await crashChild(v, 'after-swap', { force: true }), 'after-swap')
  assert.equal(storeDirs(v.store).length, 2, 'the old store and the published one')
  const s = await readIndexStatus(v.paths)
  assert.equal(s.state, 'ready')
  assert.equal(s.totalDocuments, FINAL)
  await recoverAndCheck(v)
})

test('a warm reader of this process follows a store another process published, even if it then crashed', async () => {
  const v = await indexedVault()
  // Warm the in-process reader on the original store.
  assert.deepEqual(await recallIds(v.paths, uniqueWord(3)), ['concepts/topic-3'])
  mutate(v)
  assertKilled(await crashChild(v, 'after-swap', { force: true }), 'after-swap')
  // No reindex in between: the next recall reads CURRENT and opens the new store.
  await assertNoPageLost(v)
  const r = await reindexAfterHolderDied(v.paths)
  assert.equal(r.ok, true, JSON.stringify(r.errors))
  assert.equal(r.status.state, 'ready')
  assert.equal(r.status.totalDocuments, FINAL)
  assertClean(v)
})

const modelRoot = process.env.LLM_WIKI_MODELS_DIR || path.join(repoRoot, '.models')
const haveModels = fs.existsSync(path.join(modelRoot, 'runtime', 'runtime.json'))

test(
  'vector phase killed before a batch commit: the committed batches stay, the next run finishes without leftovers',
  { skip: !haveModels && `no models at ${modelRoot}` },
  async () => {
    // 700 one-chunk pages: several commit batches (the first is 32 chunks).
    const pages = {}
    for (let i = 0; i < 700; i++) pages[`notes/n-${i}.md`] = page({ title: `Note ${i}`, body: `Short note ${i} about ${uniqueWord(i, 'v')}.` })
    const v = makeVault(path.join(base, 'v'), { pages })
    assert.equal((await reindexOne(v.paths)).ok, true)
    const env = { LLM_WIKI_MODELS_DIR: modelRoot, LLM_WIKI_THREADS: '1' }
    const child = await crashChild(v, 'vectors-before-commit', { component: 'vectors', env })
    assertKilled(child, 'vectors-before-commit')
    let s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'ready', JSON.stringify(s.issues))
    assert.equal(s.embeddedChunks, 0, 'the first batch was killed before its commit')
    const done = await runCli(['index', v.root, '--component', 'vectors', '--json'], { env: { ...env, WIKI_HOME: wikiHome }, timeoutMs: 300_000 })
    assert.equal(done.code, 0, done.stderr)
    s = await readIndexStatus(v.paths)
    assert.equal(s.embeddedChunks, s.totalChunks)
    assert.equal(s.needsEmbedding, 0)
    assert.equal(s.hasVectorIndex, true)
    // The killed batch's segment file is gone; one segment holds every vector.
    assert.equal(fs.readdirSync(path.join(v.current, 'vectors')).length, 1)
    assertClean(v)
  },
)

test(
  'vector phase killed after writing the ANN index, before the commit naming it: vectors kept, the next run rebuilds it, no leftovers',
  { skip: !haveModels && `no models at ${modelRoot}` },
  async () => {
    const pages = {}
    for (let i = 0; i < 40; i++) pages[`notes/a-${i}.md`] = page({ title: `Note ${i}`, body: `Short note ${i} about ${uniqueWord(i, 'a')}.` })
    const v = makeVault(path.join(base, 'va'), { pages })
    assert.equal((await reindexOne(v.paths)).ok, true)
    // Forced on: 40 vectors are far below the automatic threshold.
    const env = { LLM_WIKI_MODELS_DIR: modelRoot, LLM_WIKI_THREADS: '1', LLM_WIKI_ANN: 'on' }
    const child = await crashChild(v, 'ann-before-commit', { component: 'vectors', env })
    assertKilled(child, 'ann-before-commit')
    const files = () => fs.readdirSync(path.join(v.current, 'vectors')).sort()
    let s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'ready', JSON.stringify(s.issues))
    assert.equal(s.embeddedChunks, s.totalChunks, 'the vector batches were committed before the index was built')
    assert.equal(files().filter((n) => n.endsWith('.ann')).length, 1, `the index file was written before the kill: ${files()}`)
    const done = await runCli(['index', v.root, '--component', 'vectors', '--json'], { env: { ...env, WIKI_HOME: wikiHome }, timeoutMs: 300_000 })
    assert.equal(done.code, 0, done.stderr)
    s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'ready', JSON.stringify(s.issues))
    assert.equal(s.embeddedChunks, s.totalChunks)
    // One segment and one index file (the orphan collected, a listed one built); no temp files.
    const names = files()
    assert.equal(names.filter((n) => n.endsWith('.vec')).length, 1, `${names}`)
    assert.equal(names.filter((n) => n.endsWith('.ann')).length, 1, `${names}`)
    assert.equal(names.length, 2, `${names}`)
    assertClean(v)
  },
)
