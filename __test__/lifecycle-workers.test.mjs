// Process lifecycle beyond lifecycle.test.mjs: the addon inside worker_threads (several Node
// environments in one process, a worker torn down while native work is in flight), many
// concurrent recalls racing a large reindex (each answer is the old or the new generation's,
// never an error), and clean process exit after dense models were loaded (main thread and worker).
// Scenarios that could take the whole process down run in a child process.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'

import {
  addon,
  editPage,
  EXPLICIT,
  makeTmp,
  makeVault,
  noPersonalVault,
  page,
  repoRoot,
  rmDir,
  runNodeScript,
  testHooks,
  topicPages,
  uniqueWord,
} from './helpers.mjs'

const INDEX = path.join(repoRoot, 'index.js')
const modelRoot = process.env.LLM_WIKI_MODELS_DIR || path.join(repoRoot, '.models')
const haveModels = fs.existsSync(path.join(modelRoot, 'all-MiniLM-L6-v2-int8', 'manifest.json'))

/** A lexical explicit policy for one vault (no personal vault is involved). */
const LEXICAL = { policy: EXPLICIT, mode: 'lexical' }

let base
before(() => {
  base = makeTmp('llmwiki-lifecycle-')
  noPersonalVault(base)
})
after(() => rmDir(base))

/**
 * Body of every worker (serialized into the child process, run with `eval: true`). Reindexes
 * `workerData.root`, recalls `query`, optionally panics on purpose, recalls a shared vault, or
 * only starts a long reindex (to be terminated); posts `{started}` then `{done, ...}`.
 */
function workerBody() {
  const { parentPort, workerData: d } = require('node:worker_threads')
  const addon = require(d.index)
  const policy = { includePersonal: true, minScore: d.dense ? 0 : 0.25, maxPerVault: 10, maxResults: 5 }
  const mode = d.dense ? 'hybrid' : 'lexical'
  ;(async () => {
    const paths = { root: d.root }
    parentPort.postMessage({ started: true })
    if (d.reindexOnly) {
      await addon.reindexWiki(paths, { components: ['lexical'], force: true })
      parentPort.postMessage({ done: true })
      return
    }
    const r = (await addon.reindexWiki(paths, { components: d.dense ? ['lexical', 'vectors'] : ['lexical'] })).results[0].result
    const rec = await addon.recallWiki(paths, d.query, { policy, mode })
    const out = { done: true, reindexOk: r.ok, vectors: r.vectors.generated, ids: rec.results.map((x) => x.id), mode: rec.mode }
    if (!d.dense && d.panicMarker) {
      // A recall whose query carries the test-hooks marker panics on its native job thread.
      out.panicCode = await addon.recallWiki(paths, d.panicMarker + ' panic inside a worker', { policy, mode }).then(() => 'resolved', (e) => e.code)
      out.afterPanicIds = (await addon.recallWiki(paths, d.query, { policy, mode })).results.map((x) => x.id)
    }
    if (d.shared) {
      out.sharedIds = []
      for (let i = 0; i < (d.rounds || 1); i++) {
        const s = await addon.recallWiki({ root: d.shared }, d.sharedQuery, { policy, mode: 'lexical' })
        out.sharedIds.push(...s.results.map((x) => x.id))
      }
    }
    parentPort.postMessage(out)
  })().catch((e) => {
    parentPort.postMessage({ error: String((e && e.stack) || e) })
    process.exitCode = 2
  })
}

/**
 * CommonJS prelude of a child process: `addon`, `runWorker(data, {terminateAfterMs})` (resolves
 * `{code, messages}` when the worker exits) and `check(cond, what)`.
 */
const PRELUDE = `
  const { Worker } = require('node:worker_threads');
  const addon = require(${JSON.stringify(INDEX)});
  const WORKER_SOURCE = ${JSON.stringify(`(${workerBody.toString()})()`)};
  function runWorker(workerData, { terminateAfterMs } = {}) {
    return new Promise((resolve, reject) => {
      const w = new Worker(WORKER_SOURCE, { eval: true, workerData: { index: ${JSON.stringify(INDEX)}, panicMarker: process.env.LLM_WIKI_TEST_PANIC, ...workerData } });
      const messages = [];
      w.on('message', (m) => {
        messages.push(m);
        if (m.started && terminateAfterMs !== undefined) setTimeout(() => w.terminate(), terminateAfterMs);
      });
      w.on('error', reject);
      w.on('exit', (code) => resolve({ code, messages }));
    });
  }
  function check(cond, what) { if (!cond) throw new Error('check failed: ' + what) }
`

/** Run `body` (async, PRELUDE in scope) in a child Node process that must exit 0 by itself. */
async function inChild(body, { env = {}, timeoutMs = 60_000 } = {}) {
  const source = `${PRELUDE}
    (async () => { ${body} })().then(
      (out) => console.log('RESULT ' + JSON.stringify(out ?? null)),
      (e) => { console.error('FAILED', e); process.exitCode = 3 },
    );`
  const started = Date.now()
  const c = await runNodeScript(source, { env: { WIKI_HOME: process.env.WIKI_HOME, ...env }, timeoutMs })
  assert.equal(c.signal, null, `killed by ${c.signal}\n${c.stderr}`)
  assert.equal(c.code, 0, `exit ${c.code}\n${c.stderr}`)
  const line = c.stdout.split('\n').find((l) => l.startsWith('RESULT '))
  assert.ok(line, `no result line\n${c.stdout}\n${c.stderr}`)
  return { out: JSON.parse(line.slice(7)), ms: Date.now() - started, stderr: c.stderr }
}

function smallVault(name, n = 5, salt = 'q') {
  return makeVault(path.join(base, name), { pages: topicPages(n, { salt }) })
}

describe('worker_threads', () => {
  test('recall and reindex inside a worker; the worker exits and the main thread continues', async () => {
    const v = smallVault('w1', 5)
    const { out } = await inChild(`
      const w = await runWorker({ root: ${JSON.stringify(v.root)}, query: ${JSON.stringify(uniqueWord(3))} });
      check(w.code === 0, 'worker exit code ' + w.code);
      const done = w.messages.find((m) => m.done);
      check(done, 'worker result ' + JSON.stringify(w.messages));
      // Main thread keeps using the addon after the worker's environment is gone.
      const paths = { root: ${JSON.stringify(v.root)} };
      const rec = await addon.recallWiki(paths, ${JSON.stringify(uniqueWord(4))}, { policy: ${JSON.stringify(EXPLICIT)}, mode: 'lexical' });
      const status = await addon.readIndexStatus(paths);
      return { worker: done, main: rec.results.map((r) => r.id), state: status.state };
    `)
    assert.equal(out.worker.reindexOk, true)
    assert.deepEqual(out.worker.ids, ['concepts/topic-3'])
    if (testHooks) {
      assert.equal(out.worker.panicCode, 'internal_panic', 'a native panic rejects with internal_panic inside a worker too')
      assert.deepEqual(out.worker.afterPanicIds, ['concepts/topic-3'], 'the worker keeps working after the panic')
    }
    assert.deepEqual(out.main, ['concepts/topic-4'])
    assert.equal(out.state, 'ready')
  })

  test('two workers at once (own vaults + a shared one) while the main thread recalls', async () => {
    const a = smallVault('wa', 6, 'a')
    const b = smallVault('wb', 6, 'b')
    const shared = smallVault('wshared', 6, 's')
    await addon.reindexWiki({ root: shared.root }, { components: ['lexical'] })
    const { out } = await inChild(`
      const shared = ${JSON.stringify(shared.root)};
      const [wa, wb, mainIds] = await Promise.all([
        runWorker({ root: ${JSON.stringify(a.root)}, query: ${JSON.stringify(uniqueWord(2, 'a'))}, shared, sharedQuery: ${JSON.stringify(uniqueWord(1, 's'))}, rounds: 5 }),
        runWorker({ root: ${JSON.stringify(b.root)}, query: ${JSON.stringify(uniqueWord(5, 'b'))}, shared, sharedQuery: ${JSON.stringify(uniqueWord(1, 's'))}, rounds: 5 }),
        (async () => {
          const ids = [];
          for (let i = 0; i < 20; i++) {
            const r = await addon.recallWiki({ root: shared }, ${JSON.stringify(uniqueWord(4, 's'))}, { policy: ${JSON.stringify(EXPLICIT)}, mode: 'lexical' });
            ids.push(r.results.map((x) => x.id).join());
          }
          return ids;
        })(),
      ]);
      return { a: { code: wa.code, done: wa.messages.find((m) => m.done) }, b: { code: wb.code, done: wb.messages.find((m) => m.done) }, mainIds };
    `)
    for (const [w, id] of [
      [out.a, 'concepts/topic-2'],
      [out.b, 'concepts/topic-5'],
    ]) {
      assert.equal(w.code, 0)
      assert.equal(w.done.reindexOk, true)
      assert.deepEqual(w.done.ids, [id])
      assert.deepEqual(new Set(w.done.sharedIds), new Set(['concepts/topic-1']))
    }
    assert.deepEqual(new Set(out.mainIds), new Set(['concepts/topic-4']))
  })

  test('a worker terminated during a reindex does not take the process down; the vault stays usable', async () => {
    const v = makeVault(path.join(base, 'wterm'), { pages: topicPages(400, { salt: 't' }) })
    const { out } = await inChild(`
      const paths = { root: ${JSON.stringify(v.root)} };
      const w = await runWorker({ root: paths.root, query: 'x', reindexOnly: true }, { terminateAfterMs: 30 });
      // The terminated reindex may still own the lock for a moment: retry until it is free.
      let r;
      const deadline = Date.now() + 30000;
      do {
        r = (await addon.reindexWiki(paths, { components: ['lexical'] })).results[0].result;
        if (r.ok) break;
        await new Promise((res) => setTimeout(res, 200));
      } while (Date.now() < deadline);
      const rec = await addon.recallWiki(paths, ${JSON.stringify(uniqueWord(123, 't'))}, { policy: ${JSON.stringify(EXPLICIT)}, mode: 'lexical' });
      return { workerCode: w.code, ok: r.ok, errors: r.errors, ids: rec.results.map((x) => x.id), total: r.status.totalDocuments };
    `)
    assert.equal(out.workerCode, 1, 'terminate() ends the worker with exit code 1')
    assert.equal(out.ok, true, JSON.stringify(out.errors))
    assert.equal(out.total, 400)
    assert.deepEqual(out.ids, ['concepts/topic-123'])
  })
})

describe('worker_threads: jobs of a terminated worker', () => {
  test(
    'a reindex started by a terminated worker is cancelled: nothing of it is committed',
    { skip: process.platform !== 'linux' && 'finds the job thread by name in /proc' },
    async () => {
      const n = 4000
      const v = makeVault(path.join(base, 'wcancel'), { pages: topicPages(n, { salt: 'c' }) })
      const { out } = await inChild(`
        const fs = require('node:fs');
        const paths = { root: ${JSON.stringify(v.root)} };
        const w = await runWorker({ root: paths.root, query: 'x', reindexOnly: true }, { terminateAfterMs: 30 });
        // The worker's reindex runs on a thread named llm-wiki-background: wait until it is gone.
        const jobThreads = () => fs.readdirSync('/proc/self/task').filter((t) => {
          try { return fs.readFileSync('/proc/self/task/' + t + '/comm', 'utf8').startsWith('llm-wiki-backgr') } catch { return false }
        }).length;
        const deadline = Date.now() + 30000;
        while (jobThreads() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        const left = jobThreads();
        const r = (await addon.reindexWiki(paths, { components: ['lexical'] })).results[0].result;
        return { workerCode: w.code, left, ok: r.ok, errors: r.errors, indexed: r.documents.indexed, unchanged: r.documents.unchanged };
      `)
      assert.equal(out.workerCode, 1)
      assert.equal(out.left, 0, 'the job thread ended')
      assert.equal(out.ok, true, JSON.stringify(out.errors))
      assert.equal(out.indexed, n, 'the terminated worker\'s first index was cancelled before its commit')
    },
  )
})

describe('concurrent recalls during a large reindex', () => {
  const MOVING = 8
  const moving = (k) => uniqueWord(k, 'mv')
  /** Old generation: the word of k is on moving/a-k; new generation: on moving/b-k. */
  function movingPages(generation) {
    const pages = {}
    for (let k = 0; k < MOVING; k++) {
      const [onA, onB] = generation === 'old' ? [moving(k), uniqueWord(k, 'pa')] : [uniqueWord(k, 'pa'), moving(k)]
      pages[`moving/a-${k}.md`] = page({ title: `Moving A ${k}`, body: `# Note\n\nThis page mentions ${onA} today.` })
      pages[`moving/b-${k}.md`] = page({ title: `Moving B ${k}`, body: `# Note\n\nThis page mentions ${onB} today.` })
    }
    return pages
  }

  /**
   * Keep `lanes` recalls in flight until `reindex` settles (each lane issues at least one).
   * Returns every outcome with whether the reindex was still running when it resolved.
   */
  async function raceRecalls(paths, reindex, lanes = 50) {
    let settled = false
    const finished = reindex.finally(() => {
      settled = true
    })
    const outcomes = []
    const lane = async (i) => {
      let n = 0
      do {
        const k = (i + n++) % MOVING
        try {
          const r = await addon.recallWiki(paths, moving(k), LEXICAL)
          const o = { k, ids: r.results.map((x) => x.id), during: !settled }
          if (o.ids.length === 0) o.diagnostics = r.diagnostics.map((d) => d.code)
          outcomes.push(o)
        } catch (e) {
          outcomes.push({ k, error: `${e.code}: ${e.message}`, during: !settled })
        }
      } while (!settled)
    }
    await Promise.all([finished, ...Array.from({ length: lanes }, (_, i) => lane(i))])
    return { result: (await reindex).results[0].result, outcomes }
  }

  /** Outcomes of both races, filled by the `before` hook below. */
  const phases = {}
  before(async () => {
    const v = makeVault(path.join(base, 'big'), { pages: { ...topicPages(2000, { salt: 'g' }), ...movingPages('old') } })
    const paths = { root: v.root }
    const first = (await addon.reindexWiki(paths, { components: ['lexical'] })).results[0].result
    assert.equal(first.ok, true, JSON.stringify(first.errors))
    assert.equal(first.status.totalDocuments, 2000 + 2 * MOVING)
    const answers = async () => {
      const out = []
      for (let k = 0; k < MOVING; k++) out.push((await addon.recallWiki(paths, moving(k), LEXICAL)).results.map((x) => x.id).join())
      return out
    }
    phases.initial = await answers()
    // 1) Full rebuild (a new store is built aside, then swapped in) with the words moved a → b.
    for (const [rel, text] of Object.entries(movingPages('new'))) editPage(v, rel, text)
    phases.full = await raceRecalls(paths, addon.reindexWiki(paths, { components: ['lexical'], force: true }))
    phases.afterFull = await answers()
    // 2) Incremental update of the same store (scope all re-hashes every page), words moved back.
    for (const [rel, text] of Object.entries(movingPages('old'))) editPage(v, rel, text, 20)
    phases.incremental = await raceRecalls(paths, addon.reindexWiki(paths, { components: ['lexical'], scope: 'all' }))
    phases.afterIncremental = await answers()
    phases.status = await addon.readIndexStatus(paths)
  })

  const expect = (to) => Array.from({ length: MOVING }, (_, k) => `moving/${to}-${k}`)
  const summary = (label, { outcomes }) => {
    const during = outcomes.filter((o) => o.during)
    const empty = outcomes.filter((o) => !o.error && o.ids.length === 0)
    return `${label}: ${outcomes.length} recalls, ${during.length} while reindexing, ${empty.length} empty`
  }

  test('50 recalls in flight while ~2000 pages are rebuilt, then updated: none rejects; each answer is the old or the new generation\'s', (t) => {
    assert.deepEqual(phases.initial, expect('a'))
    for (const [label, from, to] of [
      ['full', 'a', 'b'],
      ['incremental', 'b', 'a'],
    ]) {
      const { result, outcomes } = phases[label]
      assert.equal(result.ok, true, `${label}: ${JSON.stringify(result.errors)}`)
      assert.ok(outcomes.length >= 50, `${label}: ${outcomes.length} recalls`)
      assert.deepEqual(outcomes.filter((o) => o.error), [], `${label}: recalls rejected`)
      assert.ok(outcomes.some((o) => o.during), `${label}: no recall completed while the reindex ran`)
      for (const o of outcomes) {
        assert.ok([`moving/${from}-${o.k}`, `moving/${to}-${o.k}`].includes(o.ids.join()), `${label}: query ${o.k} returned ${JSON.stringify(o.ids)}`)
      }
      t.diagnostic(summary(label, phases[label]))
    }
    assert.ok(phases.full.outcomes.some((o) => o.during && o.ids.join() === `moving/a-${o.k}`), 'recalls before the swap answer from the old generation')
    assert.equal(phases.full.result.fullRebuild, true)
    assert.deepEqual(phases.afterFull, expect('b'))
    assert.deepEqual(phases.afterIncremental, expect('a'))
    assert.equal(phases.status.state, 'ready')
    assert.equal(phases.status.totalDocuments, 2000 + 2 * MOVING)
  })

  test(
    'no recall comes back empty while a full rebuild swaps generations',
    () => {
      for (const label of ['full', 'incremental']) {
        const empty = phases[label].outcomes.filter((o) => !o.error && o.ids.length === 0)
        assert.deepEqual(empty.slice(0, 3), [], summary(label, phases[label]))
      }
    },
  )
})

describe('process exit with dense models loaded', () => {
  const denseEnv = () => ({ LLM_WIKI_MODELS_DIR: modelRoot, LLM_WIKI_THREADS: '1' })
  const notes = () => ({
    'concepts/backups.md': page({ title: 'Backups', body: 'Keep three copies of important data, two media, one copy off site.' }),
    'concepts/sourdough.md': page({ title: 'Sourdough', body: 'Feed the starter flour and water twice a day until it doubles.' }),
  })

  test('exits 0 right after a hybrid recall resolves (models stay loaded until idle release)', { skip: !haveModels && `no models at ${modelRoot}` }, async () => {
    const v = makeVault(path.join(base, 'dense-main'), { pages: notes() })
    const { out, ms } = await inChild(
      `
      const paths = { root: ${JSON.stringify(v.root)} };
      const r = (await addon.reindexWiki(paths, { components: ['lexical', 'vectors'] })).results[0].result;
      check(r.ok && r.vectors.generated > 0, 'vectors embedded ' + JSON.stringify(r.vectors));
      const q = await addon.recallWiki(paths, 'how do I avoid losing family pictures', { policy: ${JSON.stringify({ ...EXPLICIT, minScore: 0 })}, mode: 'hybrid' });
      const st = addon.modelStatus();
      return { mode: q.mode, loaded: st.loadedModels, top: q.results[0] && q.results[0].id };
    `,
      // Far below the 300 s idle release a hanging exit would wait for; far above a loaded CI run.
      { env: denseEnv(), timeoutMs: 90_000 },
    )
    assert.equal(out.mode, 'hybrid')
    assert.ok(out.loaded >= 1, 'a model is loaded when the process ends')
    assert.equal(out.top, 'concepts/backups')
    assert.ok(ms < 90_000, `${ms} ms`)
  })

  test('a worker that loaded the embedder exits; the main thread recalls in hybrid mode and the process exits 0', { skip: !haveModels && `no models at ${modelRoot}` }, async () => {
    const v = makeVault(path.join(base, 'dense-worker'), { pages: notes() })
    const { out } = await inChild(
      `
      const w = await runWorker({ root: ${JSON.stringify(v.root)}, query: 'sourdough starter', dense: true });
      check(w.code === 0, 'worker exit ' + w.code);
      const done = w.messages.find((m) => m.done);
      check(done && done.mode === 'hybrid', 'worker recall ' + JSON.stringify(w.messages));
      const q = await addon.recallWiki({ root: ${JSON.stringify(v.root)} }, 'baking bread at home', { policy: ${JSON.stringify({ ...EXPLICIT, minScore: 0 })}, mode: 'hybrid' });
      return { worker: done, mainMode: q.mode, mainTop: q.results[0] && q.results[0].id };
    `,
      { env: denseEnv(), timeoutMs: 90_000 },
    )
    assert.equal(out.worker.reindexOk, true)
    assert.ok(out.worker.vectors > 0)
    assert.equal(out.mainMode, 'hybrid')
    assert.equal(out.mainTop, 'concepts/sourdough')
  })
})
