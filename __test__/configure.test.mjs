// Engine-wide settings change only when and as the caller says: `configure` changes the options
// it is given (`null` resets one), loading the module (in a worker thread too) changes nothing,
// a change releases only the models it makes stale, and the synchronous `configure` /
// `modelStatus` never wait for a model that is loading.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'

import { addon, makeVault, noPersonalVault, page, repoRoot, runNodeScript, tmpDir } from './helpers.mjs'

const INDEX = path.join(repoRoot, 'index.js')
const modelRoot = process.env.LLM_WIKI_MODELS_DIR || path.join(repoRoot, '.models')
const int8 = path.join(modelRoot, 'all-MiniLM-L6-v2-int8')
const haveModels = fs.existsSync(path.join(int8, 'manifest.json')) && fs.existsSync(path.join(modelRoot, 'runtime', 'runtime.json'))
const cpus = os.availableParallelism()

// Settings below must come from configure, not from the environment of the test run.
for (const v of ['LLM_WIKI_DENSE', 'LLM_WIKI_THREADS', 'LLM_WIKI_EMBED_MODEL', 'LLM_WIKI_RERANK_MODEL', 'ORT_DYLIB_PATH']) delete process.env[v]

/** A model root whose default embedder directory exists (enough for `modelStatus().embedDir`). */
function fakeModelRoot(dir) {
  fs.mkdirSync(path.join(dir, 'all-MiniLM-L6-v2-int8'), { recursive: true })
  fs.writeFileSync(path.join(dir, 'all-MiniLM-L6-v2-int8', 'manifest.json'), '{}')
  return dir
}

const NOTES = {
  'concepts/backups.md': page({ title: 'Backups', body: 'Keep three copies of important data, two media, one copy off site.' }),
  'concepts/sourdough.md': page({ title: 'Sourdough', body: 'Feed the starter flour and water twice a day until it doubles.' }),
}

test('configure changes only the options it is given; null resets one; {} changes nothing', (t) => {
  const root = fakeModelRoot(tmpDir(t))
  const embedDir = path.join(root, 'all-MiniLM-L6-v2-int8')
  addon.configure({ modelRoots: [root], threads: 1, dense: false })
  let s = addon.modelStatus()
  assert.equal(s.threads, 1)
  assert.equal(s.denseEnabled, false)
  assert.equal(s.embedDir, undefined, 'dense off: no embedder')

  addon.configure({ threads: 2 })
  s = addon.modelStatus()
  assert.equal(s.denseEnabled, false, 'changing threads keeps dense off')
  assert.equal(s.threads, Math.min(2, cpus))

  addon.configure({})
  assert.deepEqual(addon.modelStatus(), s, 'configure({}) changes nothing')

  addon.configure({ dense: null })
  s = addon.modelStatus()
  assert.equal(s.denseEnabled, true, 'dense: null goes back to the default (on)')
  assert.equal(s.embedDir, embedDir, 'the model roots were kept')
  assert.equal(s.threads, Math.min(2, cpus), 'threads were kept')

  const other = fakeModelRoot(tmpDir(t))
  addon.configure({ embedModel: path.join(other, 'all-MiniLM-L6-v2-int8') })
  assert.equal(addon.modelStatus().embedDir, path.join(other, 'all-MiniLM-L6-v2-int8'))
  addon.configure({ embedModel: null })
  assert.equal(addon.modelStatus().embedDir, embedDir, 'embedModel: null goes back to the model roots')

  addon.configure({ modelRoots: null, threads: null })
  s = addon.modelStatus()
  assert.notEqual(s.embedDir, embedDir, 'modelRoots: null clears the list')
  assert.equal(s.threads, Math.min(4, Math.max(1, Math.floor(cpus / 2))), 'threads: null is the default')

  assert.throws(() => addon.configure({ modelRoots: ['relative/dir'] }), (e) => e.code === 'invalid_argument')
  assert.throws(() => addon.configure({ threads: 'many' }), (e) => e.code === 'invalid_argument')
})

test('thread counts from configure are clamped to the number of CPUs', () => {
  for (const threads of [4294967295, -1, 100000]) {
    addon.configure({ threads })
    assert.equal(addon.modelStatus().threads, cpus, `threads: ${threads}`)
  }
  addon.configure({ threads: 0 })
  assert.equal(addon.modelStatus().threads, Math.min(4, Math.max(1, Math.floor(cpus / 2))), 'threads: 0 is the default')
})

test('loading the module in a worker thread keeps the settings the main thread configured', async (t) => {
  // index.js offers an installed onnxruntime-node package's library to the engine: give the child
  // a (fake) package so that code path runs, as in a real install.
  const cwd = tmpDir(t)
  const libDir = path.join(cwd, 'node_modules', 'onnxruntime-node', 'bin', 'napi-v6', process.platform, process.arch)
  fs.mkdirSync(libDir, { recursive: true })
  fs.writeFileSync(path.join(cwd, 'node_modules', 'onnxruntime-node', 'package.json'), '{"name":"onnxruntime-node","version":"1.30.0"}')
  const libName = { linux: 'libonnxruntime.so.1', darwin: 'libonnxruntime.1.dylib', win32: 'onnxruntime.dll' }[process.platform]
  fs.writeFileSync(path.join(libDir, libName), 'not a real library: never loaded (dense is off)')
  const root = fakeModelRoot(tmpDir(t))
  const c = await runNodeScript(
    `
    const { Worker } = require('node:worker_threads');
    const addon = require(${JSON.stringify(INDEX)});
    addon.configure({ modelRoots: [${JSON.stringify(root)}], dense: false, threads: 2 });
    const before = addon.modelStatus();
    const w = new Worker(${JSON.stringify(`require(${JSON.stringify(INDEX)}); require('node:worker_threads').parentPort.postMessage('loaded')`)}, { eval: true });
    w.once('message', () => w.terminate());
    w.once('exit', () => {
      addon.configure({ dense: true });
      console.log('RESULT ' + JSON.stringify({ before, after: addon.modelStatus() }));
    });
    `,
    { cwd, env: { ORT_DYLIB_PATH: '', LLM_WIKI_DENSE: '', LLM_WIKI_THREADS: '' } },
  )
  assert.equal(c.code, 0, c.stderr)
  const { before, after } = JSON.parse(c.stdout.split('\n').find((l) => l.startsWith('RESULT ')).slice(7))
  assert.equal(before.denseEnabled, false)
  assert.equal(before.threads, Math.min(2, cpus))
  assert.equal(after.threads, before.threads, 'the worker\'s require() kept threads')
  assert.equal(after.embedDir, path.join(root, 'all-MiniLM-L6-v2-int8'), 'the worker\'s require() kept modelRoots')
  assert.equal(before.onnxRuntimePath, path.join(libDir, libName), 'the onnxruntime-node library is a candidate')
  assert.equal(after.onnxRuntimePath, before.onnxRuntimePath)
})

test('a change releases only the models it makes stale', { skip: !haveModels && `no models at ${modelRoot}` }, async (t) => {
  const base = tmpDir(t)
  noPersonalVault(base)
  // Earlier tests left every other model setting at its default (or this runs alone).
  addon.configure({ modelRoots: [modelRoot], threads: 1 })
  const v = makeVault(path.join(base, 'vault'), { pages: NOTES })
  const r = (await addon.reindexWiki(v.paths, { components: ['lexical', 'vectors'] })).results[0].result
  assert.ok(r.ok && r.vectors.generated > 0, JSON.stringify(r))
  assert.equal(addon.modelStatus().loadedModels, 1)
  addon.configure({ idleReleaseSeconds: 600 })
  addon.configure({})
  addon.configure({ modelRoots: [modelRoot, fakeModelRoot(tmpDir(t))] })
  addon.configure({ dense: true })
  assert.equal(addon.modelStatus().loadedModels, 1, 'changes that leave the embedder as it was keep it loaded')
  if (cpus >= 2) {
    addon.configure({ threads: 2 })
    assert.equal(addon.modelStatus().loadedModels, 0, 'another thread count releases it')
    const again = await addon.recallWiki(v.paths, 'keeping family photos safe', {
      policy: { includePersonal: false, minScore: 0, maxPerVault: 10, maxResults: 3 },
      mode: 'hybrid',
    })
    assert.equal(again.mode, 'hybrid')
    assert.equal(addon.modelStatus().loadedModels, 1)
  }
  addon.configure({ dense: false })
  assert.equal(addon.modelStatus().loadedModels, 0, 'dense off releases it')
  addon.configure({ dense: null })
})

test(
  'modelStatus and configure answer while a model is loading',
  { skip: (process.platform === 'win32' && 'needs a FIFO') || (!haveModels && `no models at ${modelRoot}`) },
  async (t) => {
    // A model directory whose tokenizer.json is a FIFO: loading the model blocks reading it until
    // the test writes the real tokenizer into it, which it does only after the synchronous calls
    // returned. If they waited for the load, the child would deadlock and time out. The FIFO is
    // read twice: first by the lexical phase (chunk sizes are counted with the model's tokenizer),
    // fed once the reindex reports it, then by the model load the calls run against.
    const base = tmpDir(t)
    noPersonalVault(base)
    const model = path.join(base, 'model')
    fs.mkdirSync(model)
    const manifest = JSON.parse(fs.readFileSync(path.join(int8, 'manifest.json'), 'utf8'))
    manifest.files['tokenizer.json'].size = 0
    fs.writeFileSync(path.join(model, 'manifest.json'), JSON.stringify(manifest))
    for (const f of ['model.onnx', 'query.onnx']) fs.symlinkSync(path.join(int8, f), path.join(model, f))
    const fifo = path.join(model, 'tokenizer.json')
    const mk = spawnSync('mkfifo', [fifo])
    assert.equal(mk.status, 0, `mkfifo: ${mk.stderr}`)
    const v = makeVault(path.join(base, 'vault'), { pages: NOTES })
    const c = await runNodeScript(
      `
      const fs = require('node:fs');
      const addon = require(${JSON.stringify(INDEX)});
      addon.configure({ modelRoots: [${JSON.stringify(modelRoot)}], embedModel: ${JSON.stringify(model)}, threads: 1 });
      const fifo = ${JSON.stringify(fifo)};
      (async () => {
        let lexical = false;
        const job = addon.reindexWiki({ root: ${JSON.stringify(v.root)} }, {
          components: ['lexical', 'vectors'],
          onProgress: (e) => { if (e.progress.stage === 'lexical') lexical = true },
        });
        const tokenizer = fs.readFileSync(${JSON.stringify(path.join(int8, 'tokenizer.json'))});
        // A non-blocking open for writing succeeds once a reader has the FIFO open.
        const opened = async () => {
          for (;;) {
            try { return fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK) }
            catch (e) { if (e.code !== 'ENXIO') throw e; await new Promise((r) => setTimeout(r, 10)) }
          }
        };
        // First reader: the chunker's token counter, before the pages are indexed.
        let fd = await opened();
        await fs.promises.writeFile(fifo, tokenizer);
        fs.closeSync(fd);
        while (!lexical) await new Promise((r) => setTimeout(r, 10));
        // Second reader: the embedding model's load.
        fd = await opened();
        const during = addon.modelStatus();
        addon.configure({ idleReleaseSeconds: 120 });
        addon.configure({ threads: 1 });
        const during2 = addon.modelStatus();
        await fs.promises.writeFile(fifo, tokenizer);
        fs.closeSync(fd);
        const r = (await job).results[0].result;
        console.log('RESULT ' + JSON.stringify({ during: during.loadedModels, during2: during2.loadedModels, ok: r.ok, vectors: r.vectors.generated, after: addon.modelStatus().loadedModels }));
      })().catch((e) => { console.error(e); process.exitCode = 2 });
      `,
      { env: { WIKI_HOME: process.env.WIKI_HOME, ORT_DYLIB_PATH: '' }, timeoutMs: 60_000 },
    )
    assert.equal(c.code, 0, c.stderr)
    const out = JSON.parse(c.stdout.split('\n').find((l) => l.startsWith('RESULT ')).slice(7))
    assert.deepEqual(out, { during: 0, during2: 0, ok: true, vectors: out.vectors, after: 1 })
    assert.ok(out.vectors > 0)
  },
)
