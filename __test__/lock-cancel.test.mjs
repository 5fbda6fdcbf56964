// The store's writer lock (an OS lock: busy while a live process holds it, free the moment the
// holder dies, the owner.json marker never trusted; real contention between two CLI processes;
// overlapping calls in one process are busy at once) and cooperative cancellation.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterEach, beforeEach, describe, test } from 'node:test'

import {
  NEEDS_HOOKS,
  addon,
  makeTmp,
  makeVault,
  noPersonalVault,
  processAlive,
  readJson,
  recallIds,
  reindexAfterHolderDied,
  reindexOne,
  rmDir,
  runCli,
  spawnPausedCli,
  spawnSleeper,
  storeDirs,
  topicPages,
  uniqueWord,
  writePages,
} from './helpers.mjs'

const { readIndexStatus, reindexWiki } = addon

let base
let wikiHome
beforeEach(() => {
  base = makeTmp()
  wikiHome = noPersonalVault(base)
})
afterEach(() => rmDir(base))

function writeOwner(v, owner) {
  fs.mkdirSync(v.lockDir, { recursive: true })
  fs.writeFileSync(path.join(v.lockDir, 'owner.json'), typeof owner === 'string' ? owner : JSON.stringify(owner))
}

function assertBusy(r) {
  assert.equal(r.ok, false)
  assert.equal(r.errors.length, 1, JSON.stringify(r.errors))
  assert.equal(r.errors[0].code, 'qmd_index_busy')
  assert.ok(r.errors[0].message.length > 0)
  assert.deepEqual(r.documents, { indexed: 0, updated: 0, unchanged: 0, removed: 0 })
}

/** A CLI reindex of `v` in another process, stopped right after it took the store's lock. */
function lockHolder(v) {
  return spawnPausedCli(['index', v.root, '--component', 'lexical'], 'locked', { env: { WIKI_HOME: wikiHome } })
}

// The holder is a CLI paused at a crash point (`LLM_WIKI_PAUSE_AT`): test-hooks builds only.
describe('lock held by another process', { skip: NEEDS_HOOKS }, () => {
  test('a live holder makes reindex busy; the moment it is killed the lock is free', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(5) })
    assert.equal((await reindexOne(v.paths)).ok, true)
    writePages(v, { 'concepts/late.md': '---\ntype: concept\n---\nzxlatevor\n' })

    const holder = await lockHolder(v)
    try {
      assert.equal(readJson(path.join(v.lockDir, 'owner.json')).pid, holder.pid, 'the marker names the holder')
      const r = await reindexOne(v.paths)
      assertBusy(r)
      assert.equal(r.status.totalDocuments, 5, 'status of the untouched index')
      assert.equal(r.status.state, 'stale')
      assert.equal(fs.existsSync(v.lastError), false, 'busy is not recorded as a failed attempt')
      // Still busy on a second try.
      assertBusy(await reindexOne(v.paths))
    } finally {
      const killed = await holder.kill()
      assert.notEqual(killed.code, 0, 'killed, not finished')
    }
    assert.equal(processAlive(holder.pid), false)
    // The killed holder's marker is left behind; the OS released its lock.
    assert.equal(readJson(path.join(v.lockDir, 'owner.json')).pid, holder.pid)

    const r2 = await reindexAfterHolderDied(v.paths)
    assert.equal(r2.ok, true, JSON.stringify(r2.errors))
    assert.equal(r2.status.state, 'ready')
    assert.equal(r2.status.totalDocuments, 6)
    assert.equal(fs.existsSync(v.lockDir), false, 'the lock is released')
    assert.deepEqual(await recallIds(v.paths, 'zxlatevor'), ['concepts/late'])
  })

  test('a busy first index reports no vaultId and creates no index', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(2) })
    const holder = await lockHolder(v)
    try {
      const r = await reindexOne(v.paths)
      assertBusy(r)
      assert.equal(r.vaultId, undefined)
      assert.equal(r.status.state, 'missing')
      assert.equal(readJson(v.config).vault_id, undefined, 'config untouched while busy')
    } finally {
      await holder.kill()
    }
  })

  test('our own marker is never trusted: a stale or live-looking owner file of this engine blocks nothing', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(2) })
    const dead = spawnSleeper()
    await dead.kill()
    const alive = spawnSleeper()
    try {
      const engine = 'llm-wiki-retrieval'
      const owners = [
        { pid: process.pid, hostname: os.hostname(), acquiredAt: new Date().toISOString(), engine },
        { pid: alive.pid, hostname: os.hostname(), acquiredAt: new Date().toISOString(), engine },
        { pid: dead.pid, hostname: `not-${os.hostname()}`, acquiredAt: new Date().toISOString(), engine },
        // A marker without `engine` whose process is gone (a dead writer of the TypeScript release).
        { pid: dead.pid, hostname: os.hostname(), acquiredAt: new Date(0).toISOString() },
      ]
      for (const owner of owners) {
        writeOwner(v, owner)
        const r = await reindexOne(v.paths)
        assert.equal(r.ok, true, `${JSON.stringify(owner)}: ${JSON.stringify(r.errors)}`)
        assert.equal(r.status.totalDocuments, 2)
        assert.equal(fs.existsSync(v.lockDir), false, 'the holder removes its marker')
      }
      // An empty owner file or marker directory (a crash before the owner file was written, or a
      // writer writing it right now) blocks for a 10 s grace (issue 43 item 4), then nothing.
      const aged = (p) => fs.utimesSync(p, new Date(Date.now() - 11_000), new Date(Date.now() - 11_000))
      writeOwner(v, '')
      assertBusy(await reindexOne(v.paths))
      aged(path.join(v.lockDir, 'owner.json'))
      assert.equal((await reindexOne(v.paths)).ok, true)
      assert.equal(fs.existsSync(v.lockDir), false)
      fs.mkdirSync(v.lockDir)
      assertBusy(await reindexOne(v.paths))
      aged(v.lockDir)
      assert.equal((await reindexOne(v.paths)).ok, true)
    } finally {
      await alive.kill()
    }
  })

  test('a lock of the TypeScript release (no engine field) blocks while its process lives, and is never broken', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(2) })
    const alive = spawnSleeper()
    try {
      const owners = [
        { pid: alive.pid, hostname: os.hostname(), acquiredAt: new Date().toISOString() },
        { pid: process.pid, hostname: os.hostname(), acquiredAt: new Date().toISOString() },
        { pid: 1, hostname: `not-${os.hostname()}`, acquiredAt: new Date().toISOString() },
        '{corrupt',
        JSON.stringify({ hostname: os.hostname() }),
      ]
      for (const owner of owners) {
        writeOwner(v, owner)
        const r = await reindexOne(v.paths)
        assertBusy(r)
        const written = fs.readFileSync(path.join(v.lockDir, 'owner.json'), 'utf8')
        assert.equal(written, typeof owner === 'string' ? owner : JSON.stringify(owner), 'a lock we do not own is left as it was')
      }
      await alive.kill()
      writeOwner(v, { pid: alive.pid, hostname: os.hostname(), acquiredAt: new Date().toISOString() })
      const r = await reindexOne(v.paths)
      assert.equal(r.ok, true, 'its process died: the store is ours again')
      assert.equal(fs.existsSync(v.lockDir), false)
    } finally {
      await alive.kill()
    }
  })

  test('every vault of a multi-vault reindex gets its own busy/ok outcome', async () => {
    const personal = makeVault(path.join(base, 'home'), { pages: topicPages(1) })
    const project = makeVault(path.join(base, 'project'), { pages: topicPages(2) })
    process.env.WIKI_HOME = personal.root
    const holder = await spawnPausedCli(['index', project.root, '--component', 'lexical'], 'locked', {
      env: { WIKI_HOME: personal.root },
    })
    try {
      const r = await reindexWiki(project.paths, { vault: 'all', components: ['lexical'] })
      assert.deepEqual(r.results.map((x) => x.label), ['project', 'personal'])
      assertBusy(r.results[0].result)
      assert.equal(r.results[1].result.ok, true)
    } finally {
      await holder.kill()
      process.env.WIKI_HOME = wikiHome
    }
  })

  test('a resumed holder finishes its reindex and releases the lock', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(3) })
    const holder = await lockHolder(v)
    assertBusy(await reindexOne(v.paths))
    const done = await holder.resume()
    assert.equal(done.code, 0, done.stderr)
    assert.equal(fs.existsSync(v.lockDir), false)
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'ready', JSON.stringify(s.issues))
    assert.equal(s.totalDocuments, 3)
  })
})

describe('real contention', () => {
  test('two CLI processes reindexing one big vault: at most one fails, and only with busy', async () => {
    const v = makeVault(path.join(base, 'big'), { pages: topicPages(3000) })
    const args = ['index', v.root, '--component', 'lexical', '--json']
    const env = { WIKI_HOME: wikiHome }
    const [a, b] = await Promise.all([runCli(args, { env }), runCli(args, { env })])
    const outcomes = [a, b].map((c) => {
      assert.equal(c.signal, null, c.stderr)
      const r = JSON.parse(c.stdout)
      if (r.ok) {
        assert.equal(c.code, 0, c.stderr)
        assert.deepEqual(r.errors, [])
      } else {
        assert.equal(c.code, 1)
        assert.deepEqual(
          r.errors.map((e) => e.code),
          ['qmd_index_busy'],
        )
      }
      return r.ok
    })
    assert.ok(outcomes.filter(Boolean).length >= 1, 'at least one run succeeds')
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'ready', JSON.stringify(s.issues))
    assert.equal(s.totalDocuments, 3000)
    assert.equal(fs.existsSync(v.lockDir), false)
    assert.deepEqual(await recallIds(v.paths, uniqueWord(2999)), ['concepts/topic-2999'])
    assert.deepEqual(await recallIds(v.paths, uniqueWord(0)), ['concepts/topic-0'])
  })

  test('concurrent reindex calls in one process never wait for each other: each is ok or busy', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(200) })
    const runs = await Promise.all([reindexOne(v.paths), reindexOne(v.paths), reindexOne(v.paths, { force: true })])
    for (const r of runs) {
      if (!r.ok) assertBusy(r)
      else assert.deepEqual(r.errors, [])
    }
    assert.ok(runs.some((r) => r.ok), 'at least one run indexes')
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'ready', JSON.stringify(s.issues))
    assert.equal(s.totalDocuments, 200)
    assert.equal(fs.existsSync(v.lockDir), false)
  })
})

describe('cancellation', () => {
  const OLD = 100
  const NEW = 3000

  /** A vault indexed with OLD pages, then grown to NEW pages on disk. */
  async function grownVault() {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(OLD) })
    const r = await reindexOne(v.paths)
    assert.equal(r.ok, true)
    const more = topicPages(NEW)
    for (let i = 0; i < OLD; i++) delete more[`concepts/topic-${i}.md`]
    writePages(v, more)
    return v
  }

  /** Reindex and abort on the first mirror/lexical progress event with current > 0. */
  async function reindexAndAbort(v, input = {}) {
    const ac = new AbortController()
    let abortedAt = null
    const r = await reindexWiki(v.paths, {
      components: ['lexical'],
      ...input,
      signal: ac.signal,
      onProgress: (e) => {
        const p = e.progress
        if (!abortedAt && (p.stage === 'lexical' || p.stage === 'mirror') && p.current > 0) {
          abortedAt = p
          ac.abort()
        }
      },
    })
    assert.ok(abortedAt, 'a mirror/lexical progress event arrived')
    return r.results[0].result
  }

  async function assertOldIndexIntact(v, result) {
    assert.equal(result.ok, false)
    assert.deepEqual(result.errors, [], 'a cancellation is not an error')
    assert.equal(result.status.totalDocuments, OLD)
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'stale', JSON.stringify(s.issues))
    assert.equal(s.totalDocuments, OLD)
    assert.deepEqual(s.pendingPages, { added: NEW - OLD, changed: 0, removed: 0 })
    assert.ok(!s.issues.some((i) => i.code === 'qmd_index_error'), 'no failed attempt recorded')
    assert.equal(fs.existsSync(v.lastError), false)
    assert.equal(fs.existsSync(v.lockDir), false, 'the lock is released')
    assert.deepEqual(
      storeDirs(v.store).filter((n) => path.join(v.store, n) !== v.current),
      [],
      'no unfinished store directory is left behind',
    )
    assert.deepEqual(await recallIds(v.paths, uniqueWord(7)), ['concepts/topic-7'], 'old pages still recalled')
    assert.deepEqual(await recallIds(v.paths, uniqueWord(NEW - 1)), [], 'new pages not indexed')
  }

  test('aborting an incremental reindex mid-way keeps the previous index', async () => {
    const v = await grownVault()
    const r = await reindexAndAbort(v)
    await assertOldIndexIntact(v, r)

    const done = await reindexOne(v.paths)
    assert.equal(done.ok, true, JSON.stringify(done.errors))
    assert.equal(done.documents.indexed, NEW - OLD)
    assert.equal(done.status.state, 'ready')
    assert.equal(done.status.totalDocuments, NEW)
    assert.deepEqual(await recallIds(v.paths, uniqueWord(NEW - 1)), [`concepts/topic-${NEW - 1}`])
  })

  test('aborting a forced full rebuild keeps the previous index', async () => {
    const v = await grownVault()
    const r = await reindexAndAbort(v, { force: true })
    await assertOldIndexIntact(v, r)
  })

  test('aborting a first index leaves the vault without an index (missing), not broken', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(NEW) })
    const r = await reindexAndAbort(v)
    assert.equal(r.ok, false)
    assert.deepEqual(r.errors, [])
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'missing', JSON.stringify(s.issues))
    assert.equal(fs.existsSync(v.lockDir), false)
  })

  test('an already-aborted signal resolves ok:false quickly without touching the index', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(OLD) })
    const started = Date.now()
    const r = await reindexWiki(v.paths, { components: ['lexical'], signal: AbortSignal.abort() })
    const res = r.results[0].result
    assert.equal(res.ok, false)
    assert.deepEqual(res.errors, [])
    assert.ok(Date.now() - started < 2000, `took ${Date.now() - started} ms`)
    assert.equal(res.status.state, 'missing')
    assert.equal(fs.existsSync(v.current), false)

    assert.equal((await reindexOne(v.paths)).ok, true)
    writePages(v, { 'concepts/later.md': '---\ntype: concept\n---\nzxlatervor\n' })
    const again = await reindexWiki(v.paths, { components: ['lexical'], signal: AbortSignal.abort() })
    assert.equal(again.results[0].result.ok, false)
    assert.deepEqual(again.results[0].result.errors, [])
    const s = await readIndexStatus(v.paths)
    assert.equal(s.state, 'stale')
    assert.equal(s.totalDocuments, OLD)
  })

  test('aborting after completion changes nothing', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(3) })
    const ac = new AbortController()
    const r = await reindexWiki(v.paths, { components: ['lexical'], signal: ac.signal })
    ac.abort()
    assert.equal(r.results[0].result.ok, true)
    assert.equal((await readIndexStatus(v.paths)).state, 'ready')
  })
})
