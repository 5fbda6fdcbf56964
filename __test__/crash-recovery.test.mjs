// Crash recovery: a child CLI reindex kills itself (SIGKILL, LLM_WIKI_CRASH_AT) at every crash
// point of the incremental and the full-rebuild (staging + journaled swap) paths. The status
// right after the crash is asserted exactly, then an in-process reindex must recover with no
// page lost and no leftover (lock, journal, staging, previous). The crash points exist only in
// builds with the test-hooks cargo feature (`npm test`); elsewhere these tests are skipped.
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
  reindexOne,
  rmDir,
  runCli,
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

/** No lock, journal, staging or previous directory is left behind. */
function assertClean(v) {
  const names = fs.readdirSync(v.store).sort()
  assert.ok(!names.includes('index.lock'), `lock left: ${names}`)
  assert.ok(!names.includes('swap.json'), `journal left: ${names}`)
  assert.ok(!names.includes('previous'), `previous left: ${names}`)
  assert.deepEqual(
    names.filter((n) => n.startsWith('staging-')),
    [],
  )
  assert.ok(names.includes('current'))
}

async function crashChild(v, point, { force = false } = {}) {
  const args = ['index', v.root, '--component', 'lexical']
  if (force) args.push('--force')
  return runCli(args, { env: { LLM_WIKI_CRASH_AT: point, WIKI_HOME: wikiHome } })
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

async function assertRecallSkipsRecoveringVault(v) {
  const explicit = await recallWiki(v.paths, uniqueWord(3), { policy: EXPLICIT, mode: 'lexical' })
  assert.deepEqual(explicit.results, [])
  assert.deepEqual(
    explicit.diagnostics.map((d) => d.code),
    ['qmd_swap_interrupted'],
  )
  const automatic = await recallWiki(v.paths, uniqueWord(3), { policy: AUTOMATIC, mode: 'lexical' })
  assert.deepEqual(automatic.results, [])
  assert.deepEqual(automatic.diagnostics, [], 'automatic recall skips the vault silently')
}

async function recoverAndCheck(v) {
  const r = await reindexOne(v.paths)
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
    // point, state, swapPhase, documents the status reports
    ['before-swap', 'stale', undefined, INITIAL],
    ['swap-prepared', 'recovering', 'prepared', INITIAL],
    ['swap-previous-moved', 'recovering', 'previous-moved', 0],
    ['swap-current-promoted', 'recovering', 'current-promoted', FINAL],
    ['swap-validated', 'recovering', 'validated', FINAL],
  ]
  for (const [point, state, phase, docs] of cases) {
    test(`killed at ${point}`, async () => {
      const v = await indexedVault()
      mutate(v)
      const child = await crashChild(v, point, { force: true })
      assertKilled(child, point)
      assertLockOwnedBy(v, child.pid)

      const s = await readIndexStatus(v.paths)
      assert.equal(s.state, state, JSON.stringify(s.issues))
      assert.equal(s.swapPhase, phase)
      assert.equal(s.totalDocuments, docs)
      if (state === 'recovering') {
        assert.deepEqual(
          s.issues.map((i) => i.code),
          ['qmd_swap_interrupted'],
        )
        assert.ok(fs.existsSync(v.swapFile))
        await assertRecallSkipsRecoveringVault(v)
      } else {
        assert.ok(s.issues.some((i) => i.code === 'qmd_index_stale'), JSON.stringify(s.issues))
        assert.ok(
          fs.readdirSync(v.store).some((n) => n.startsWith('staging-')),
          'the unfinished staging directory is left behind',
        )
      }

      const r = await recoverAndCheck(v)
      if (state === 'recovering') {
        assert.ok(r.warnings.some((w) => w.code === 'qmd_swap_interrupted'), JSON.stringify(r.warnings))
      }
    })
  }
})

describe('full rebuild path (first index)', () => {
  const cases = [
    ['before-swap', 'missing', undefined, 0],
    ['swap-prepared', 'recovering', 'prepared', 0],
    ['swap-current-promoted', 'recovering', 'current-promoted', FINAL],
    ['swap-validated', 'recovering', 'validated', FINAL],
  ]
  async function finalVault() {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(INITIAL) })
    mutate(v)
    return v
  }
  for (const [point, state, phase, docs] of cases) {
    test(`killed at ${point}`, async () => {
      const v = await finalVault()
      const child = await crashChild(v, point)
      assertKilled(child, point)
      assertLockOwnedBy(v, child.pid)

      const s = await readIndexStatus(v.paths)
      assert.equal(s.state, state, JSON.stringify(s.issues))
      assert.equal(s.swapPhase, phase)
      assert.equal(s.totalDocuments, docs)
      if (state === 'recovering') await assertRecallSkipsRecoveringVault(v)
      if (state === 'missing') {
        const explicit = await recallWiki(v.paths, 'zxaddedonevor', { policy: EXPLICIT, mode: 'lexical' })
        assert.deepEqual(explicit.results, [])
        assert.deepEqual(explicit.diagnostics.map((d) => d.code), ['qmd_index_missing'])
      }
      await recoverAndCheck(v)
    })
  }

  test('swap-previous-moved is not reached without a previous index (the run completes)', async () => {
    const v = await finalVault()
    const child = await crashChild(v, 'swap-previous-moved')
    assert.equal(child.signal, null, child.stderr)
    assert.equal(child.code, 0, child.stderr)
    assert.equal((await readIndexStatus(v.paths)).state, 'ready')
    await recoverAndCheck(v)
  })
})

test('a crash point of the other path is inert (incremental run with a full-rebuild point)', async () => {
  const v = await indexedVault()
  mutate(v)
  const child = await crashChild(v, 'swap-prepared')
  assert.equal(child.code, 0, child.stderr)
  assert.equal(child.signal, null)
  const s = await readIndexStatus(v.paths)
  assert.equal(s.state, 'ready', JSON.stringify(s.issues))
  assert.equal(s.totalDocuments, FINAL)
  await assertNoPageLost(v)
})

test('two crashes in a row (prepared, then previous-moved) still lose nothing', async () => {
  const v = await indexedVault()
  mutate(v)
  assertKilled(await crashChild(v, 'swap-prepared', { force: true }), 'swap-prepared')
  // The second run recovers the first crash itself, then crashes again mid-swap.
  assertKilled(await crashChild(v, 'swap-previous-moved', { force: true }), 'swap-previous-moved')
  const s = await readIndexStatus(v.paths)
  assert.equal(s.state, 'recovering')
  assert.equal(s.swapPhase, 'previous-moved')
  await recoverAndCheck(v)
})

test(
  'a warm reader of this process sees the store kept by recovering a crashed rebuild',
  async () => {
    const v = await indexedVault()
    // Warm the in-process reader on the original generation 1.
    assert.deepEqual(await recallIds(v.paths, uniqueWord(3)), ['concepts/topic-3'])
    mutate(v)
    assertKilled(await crashChild(v, 'swap-current-promoted', { force: true }), 'swap-current-promoted')
    const r = await reindexOne(v.paths)
    assert.equal(r.ok, true, JSON.stringify(r.errors))
    assert.equal(r.status.state, 'ready')
    assert.equal(r.status.totalDocuments, FINAL)
    await assertNoPageLost(v)
  },
)
