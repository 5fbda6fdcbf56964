// Dense retrieval through the addon: vectors in the index store, hybrid/adaptive/quality modes,
// and every fallback row of the design's error table (no ONNX Runtime library, corrupt model,
// missing vectors, stale vectors, reranker timeout, cancel during embedding). Needs the model root
// built by scripts/fetch_models.py (`.models/`, or LLM_WIKI_MODELS_DIR).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { describe, test } from 'node:test'

import {
  addon,
  copyPiBenchVault,
  skipWithoutPiBenchVault,
  editPage,
  AUTOMATIC,
  EXPLICIT,
  makeVault,
  noPersonalVault,
  page,
  runNodeScript,
  repoRoot,
  tmpDir,
  topicPages,
} from './helpers.mjs'

const modelRoot = process.env.LLM_WIKI_MODELS_DIR || path.join(repoRoot, '.models')
if (!fs.existsSync(path.join(modelRoot, 'runtime', 'runtime.json'))) {
  throw new Error(`model root ${modelRoot} is missing: run python3 scripts/fetch_models.py`)
}
const int8 = path.join(modelRoot, 'all-MiniLM-L6-v2-int8')
const fp32 = path.join(modelRoot, 'all-MiniLM-L6-v2-fp32')
const crossEncoder = path.join(modelRoot, 'test-cross-encoder-int8')

/** The test models, every other model setting back to its default (configure only changes what it is given). */
function useModels(extra = {}) {
  addon.configure({ modelRoots: [modelRoot], threads: 2, embedModel: null, rerankModel: null, onnxRuntimePath: null, dense: null, ...extra })
}

const NOTES = {
  'concepts/backups.md': page({ title: 'Backups', body: 'Keep three copies of important data, two media, one copy off site.' }),
  'concepts/sourdough.md': page({ title: 'Sourdough', body: 'Feed the starter flour and water twice a day until it doubles.' }),
  'concepts/tls.md': page({ title: 'TLS certificates', body: 'Renew certificates before they expire and reload the proxy.' }),
  'sources/restore.md': page({ type: 'source', title: 'Restore drill', body: 'The off-site copy restored the photos after the disk failed.' }),
}

async function vectorVault(t, pages = NOTES) {
  const root = tmpDir(t)
  noPersonalVault(root)
  const v = makeVault(path.join(root, 'vault'), { pages })
  const r = await addon.reindexWiki({ root: v.root }, { components: ['lexical', 'vectors'] })
  return { v, paths: { root: v.root }, result: r.results[0].result }
}

describe('vectors in the store', () => {
  test('reindex embeds every chunk once and status reports the model', async (t) => {
    useModels()
    const { paths, result } = await vectorVault(t)
    assert.equal(result.ok, true, JSON.stringify(result.errors))
    assert.equal(result.vectors.generated, result.chunks.total)
    assert.ok(result.chunks.total >= 4)
    const s = await addon.readIndexStatus(paths)
    assert.equal(s.state, 'ready')
    assert.equal(s.hasVectorIndex, true)
    assert.equal(s.needsEmbedding, 0)
    assert.equal(s.embeddedChunks, s.totalChunks)
    // The id names the model bytes (`…:int8@<sha256 prefix>`), so a recipe change re-embeds.
    const manifest = JSON.parse(fs.readFileSync(path.join(int8, 'manifest.json'), 'utf8'))
    assert.match(manifest.id, /^sentence-transformers\/all-MiniLM-L6-v2:int8@[0-9a-f]{12}$/)
    assert.equal(s.models.embed, manifest.id)
    // A no-op reindex embeds nothing.
    const again = (await addon.reindexWiki(paths, { components: ['lexical', 'vectors'] })).results[0].result
    assert.equal(again.vectors.generated, 0)
    assert.equal(again.vectors.skipped, result.chunks.total)
  })

  test('a one-page edit re-embeds only that page\'s changed chunks', async (t) => {
    useModels()
    const long = (tag) =>
      page({ title: 'Long', body: `# One\n\nFirst section stays the same ${tag === 'x' ? '' : ''}words.\n\n# Two\n\nSecond section about ${tag}.\n` })
    const { v, paths } = await vectorVault(t, { ...NOTES, 'concepts/long.md': long('alpha') })
    editPage(v, 'concepts/long.md', long('beta'))
    const r = (await addon.reindexWiki(paths, { components: ['lexical', 'vectors'] })).results[0].result
    assert.equal(r.documents.updated, 1)
    assert.equal(r.vectors.generated, 1, 'only the edited section is embedded again')
  })

  test('forced vectors re-embed everything; forced lexical keeps vectors', async (t) => {
    useModels()
    const { paths, result } = await vectorVault(t)
    const lex = (await addon.reindexWiki(paths, { components: ['lexical'], force: true })).results[0].result
    assert.equal(lex.ok, true)
    assert.equal(lex.fullRebuild, true)
    assert.equal(lex.status.needsEmbedding, 0, 'vectors survive a forced lexical rebuild')
    const vec = (await addon.reindexWiki(paths, { components: ['vectors'], force: true })).results[0].result
    assert.equal(vec.vectors.generated, result.chunks.total)
  })

  test('a vault copied elsewhere (another machine: new path, new mtimes) keeps its index: no absolute path stored, nothing re-embedded', async (t) => {
    useModels()
    const { v, result } = await vectorVault(t)
    // No store file names the vault's location (text files and tantivy's binary files alike).
    const needle = Buffer.from(v.root)
    const files = fs.readdirSync(v.store, { recursive: true }).map((f) => path.join(v.store, f)).filter((f) => fs.statSync(f).isFile())
    assert.ok(files.length > 5)
    for (const f of files) assert.equal(fs.readFileSync(f).includes(needle), false, `${f} contains ${v.root}`)
    const moved = path.join(path.dirname(v.root), 'elsewhere', 'copied-vault')
    fs.cpSync(v.root, moved, { recursive: true }) // timestamps not preserved: every page looks touched
    fs.rmSync(v.root, { recursive: true, force: true })
    const paths = { root: moved }
    const hybrid = await addon.recallWiki(paths, 'backup copies', { policy: EXPLICIT, mode: 'hybrid' })
    assert.equal(hybrid.mode, 'hybrid', JSON.stringify(hybrid.diagnostics))
    assert.ok(hybrid.results[0].path.startsWith(moved), hybrid.results[0].path)
    const re = (await addon.reindexWiki(paths, { components: ['lexical', 'vectors'] })).results[0].result
    assert.equal(re.ok, true, JSON.stringify(re.errors))
    assert.equal(re.fullRebuild, false)
    assert.equal(re.documents.updated, 0, 'same content hashes: nothing re-indexed')
    assert.equal(re.documents.unchanged, Object.keys(NOTES).length)
    assert.equal(re.vectors.generated, 0, 'no chunk re-embedded')
    assert.equal(re.status.state, 'ready')
    assert.equal(re.status.needsEmbedding, 0)
    assert.equal(result.vectors.generated, result.chunks.total)
  })
})

describe('modes', () => {
  test('hybrid finds a paraphrase lexical search cannot', async (t) => {
    useModels()
    const { paths } = await vectorVault(t)
    const q = 'how do I avoid losing my family pictures'
    const ranking = { ...EXPLICIT, minScore: 0 } // compare rankings, not the confidence floor
    const lexical = await addon.recallWiki(paths, q, { policy: ranking, mode: 'lexical' })
    const hybrid = await addon.recallWiki(paths, q, { policy: ranking, mode: 'hybrid' })
    assert.equal(hybrid.mode, 'hybrid')
    assert.ok(!lexical.results.some((r) => r.id === 'concepts/backups' || r.id === 'sources/restore'))
    assert.ok(['concepts/backups', 'sources/restore'].includes(hybrid.results[0]?.id), JSON.stringify(hybrid.results.map((r) => r.id)))
    assert.ok(hybrid.results[0].matchReasons.some((m) => m.startsWith('dense:')))
    assert.ok(hybrid.results.every((r) => r.confidence >= 0 && r.confidence <= 1))
  })

  test('typed sub-queries feed their own lists', async (t) => {
    useModels()
    const { paths } = await vectorVault(t)
    const r = await addon.recallWiki(paths, 'starter', {
      policy: EXPLICIT,
      mode: 'hybrid',
      subqueries: [
        { type: 'lex', query: 'starter' },
        { type: 'vec', query: 'baking bread at home' },
      ],
    })
    assert.equal(r.results[0].id, 'concepts/sourdough')
    await assert.rejects(
      addon.recallWiki(paths, 'x', { policy: EXPLICIT, mode: 'hybrid', subqueries: [{ type: 'hyde', query: 'x' }] }),
      { code: 'invalid_argument' },
    )
  })

  test('adaptive escalates questions only when a second stage exists, and bypasses exact matches', async (t) => {
    useModels()
    const { paths } = await vectorVault(t)
    // No cross-encoder, no sentence rescoring: quality could not change the ranking.
    const plain = await addon.recallWiki(paths, 'how do I renew certificates', { policy: EXPLICIT, mode: 'adaptive' })
    assert.equal(plain.mode, 'hybrid')
    assert.ok(plain.trace.some((x) => x.includes('no second stage configured')), JSON.stringify(plain.trace))
    const q = await addon.recallWiki(paths, 'how do I renew certificates', { policy: EXPLICIT, mode: 'adaptive', sentenceRescore: true })
    assert.equal(q.mode, 'quality')
    assert.ok(q.trace.some((x) => x.includes('interrogative')))
    const exact = await addon.recallWiki(paths, 'Sourdough', { policy: EXPLICIT, mode: 'adaptive' })
    assert.equal(exact.mode, 'hybrid')
    assert.equal(exact.results[0].id, 'concepts/sourdough')
    assert.ok(exact.trace.some((x) => x.includes('bypasses escalation')))
  })

  test('automatic recall on the pi benchmark vault injects nothing for its negatives in every mode', { skip: skipWithoutPiBenchVault() }, async (t) => {
    useModels()
    const root = tmpDir(t)
    noPersonalVault(root)
    const v = copyPiBenchVault(path.join(root, 'pi'))
    await addon.reindexWiki({ root: v.root }, { components: ['lexical', 'vectors'] })
    const auto = { includePersonal: false, minScore: 0.5, maxPerVault: 10, maxResults: 3 }
    for (const mode of ['hybrid', 'adaptive', 'quality']) {
      for (const q of ['Flipkart casual mens wear', 'Razorpay webhook endpoint', 'hotel trial balance audit']) {
        const r = await addon.recallWiki({ root: v.root }, q, { policy: auto, mode })
        assert.deepEqual(r.results, [], `${mode}: ${q}`)
      }
    }
    const hit = await addon.recallWiki({ root: v.root }, 'QMD', { policy: auto, mode: 'hybrid' })
    assert.equal(hit.results[0].id, 'entities/qmd')
  })
})

describe('fallbacks (design error table)', () => {
  test('no model installed yet: explicit recall is lexical and one diagnostic names the download; dense off and automatic recall stay quiet', async (t) => {
    const root = tmpDir(t)
    const v = makeVault(path.join(root, 'vault'), { pages: NOTES })
    // The generated loader, not index.js: index.js adds this checkout's .models/ as a model root.
    const script = `
      const addon = require(${JSON.stringify(path.join(repoRoot, 'binding.js'))})
      const paths = { root: ${JSON.stringify(v.root)} }
      ;(async () => {
        await addon.reindexWiki(paths, {})
        const ask = async (policy) => {
          const q = await addon.recallWiki(paths, 'backup copies off site', { policy, mode: 'hybrid' })
          return { mode: q.mode, diags: q.diagnostics.map((d) => [d.code, d.message]), ids: q.results.map((x) => x.id) }
        }
        const explicit = await ask(${JSON.stringify(EXPLICIT)})
        const automatic = await ask(${JSON.stringify(AUTOMATIC)})
        addon.configure({ dense: false })
        const off = await ask(${JSON.stringify(EXPLICIT)})
        console.log(JSON.stringify({ explicit, automatic, off }))
      })()`
    const empty = path.join(root, 'empty')
    fs.mkdirSync(empty)
    const out = await runNodeScript(script, {
      env: { LLM_WIKI_MODELS_DIR: '', XDG_CACHE_HOME: empty, HOME: empty, WIKI_HOME: path.join(root, 'none') },
    })
    assert.equal(out.code, 0, out.stderr)
    const { explicit, automatic, off } = JSON.parse(out.stdout)
    assert.equal(explicit.mode, 'lexical')
    assert.equal(explicit.ids[0], 'concepts/backups')
    assert.equal(explicit.diags.length, 1, JSON.stringify(explicit.diags))
    const [code, message] = explicit.diags[0]
    assert.equal(code, 'dense_unavailable')
    assert.match(message, /llm-wiki-retrieval download/)
    assert.ok(!message.includes('\n'))
    assert.deepEqual(automatic.diags, [])
    assert.equal(off.mode, 'lexical')
    assert.deepEqual(off.diags, [])
  })

  test('no ONNX Runtime library: reindex warns, recall degrades to lexical with a diagnostic', async (t) => {
    const root = tmpDir(t)
    const v = makeVault(path.join(root, 'vault'), { pages: NOTES })
    const script = `
      const addon = require(${JSON.stringify(path.join(repoRoot, 'index.js'))})
      process.env.WIKI_HOME = ${JSON.stringify(path.join(root, 'none'))}
      addon.configure({ modelRoots: [${JSON.stringify(modelRoot)}], onnxRuntimePath: '/nonexistent/libonnxruntime.so.1' })
      ;(async () => {
        const r = (await addon.reindexWiki({ root: ${JSON.stringify(v.root)} }, {})).results[0].result
        const q = await addon.recallWiki({ root: ${JSON.stringify(v.root)} }, 'backup copies', { policy: ${JSON.stringify(EXPLICIT)}, mode: 'hybrid' })
        console.log(JSON.stringify({ ok: r.ok, warnings: r.warnings.map(w => w.code), mode: q.mode, diags: q.diagnostics.map(d => d.code), ids: q.results.map(x => x.id) }))
      })()`
    const out = await runNodeScript(script, { env: { ORT_DYLIB_PATH: '' } })
    assert.equal(out.code, 0, out.stderr)
    const r = JSON.parse(out.stdout)
    assert.equal(r.ok, true)
    assert.ok(r.warnings.includes('vectors_unavailable'))
    assert.equal(r.mode, 'lexical')
    assert.ok(r.diags.includes('qmd_vectors_missing') || r.diags.includes('dense_unavailable'), r.diags.join())
    assert.equal(r.ids[0], 'concepts/backups')
  })

  test('corrupt model: recall degrades to lexical with dense_unavailable; a sound query graph keeps hybrid', async (t) => {
    useModels()
    const { v, paths } = await vectorVault(t)
    const garbageModel = (dir) =>
      fs.writeFileSync(path.join(dir, 'model.onnx'), Buffer.alloc(fs.statSync(path.join(int8, 'model.onnx')).size, 7))
    // Without a query graph (a hub download lists none) the model's graph is the only one: it must load.
    const manifest = JSON.parse(fs.readFileSync(path.join(int8, 'manifest.json'), 'utf8'))
    const { 'query.onnx': _query, ...files } = manifest.files
    const bad = tmpDir(t)
    fs.writeFileSync(path.join(bad, 'manifest.json'), JSON.stringify({ ...manifest, files }))
    fs.copyFileSync(path.join(int8, 'tokenizer.json'), path.join(bad, 'tokenizer.json'))
    garbageModel(bad)
    addon.configure({ modelRoots: [modelRoot], embedModel: bad })
    const r = await addon.recallWiki(paths, 'backup copies', { policy: EXPLICIT, mode: 'hybrid' })
    assert.equal(r.mode, 'lexical')
    assert.ok(r.diagnostics.some((d) => d.code === 'dense_unavailable'), JSON.stringify(r.diagnostics))
    assert.ok(r.trace.some((x) => x.startsWith('fallback:hybrid->lexical')))
    assert.equal(r.results[0].id, 'concepts/backups')
    // With a query graph, queries never run model.onnx (it opens on the first document): hybrid
    // still answers; embedding a new chunk needs it, and the reindex warns instead of failing.
    const withQuery = tmpDir(t)
    for (const f of ['manifest.json', 'tokenizer.json', 'query.onnx']) fs.copyFileSync(path.join(int8, f), path.join(withQuery, f))
    garbageModel(withQuery)
    addon.configure({ modelRoots: [modelRoot], embedModel: withQuery })
    const h = await addon.recallWiki(paths, 'backup copies', { policy: EXPLICIT, mode: 'hybrid' })
    assert.equal(h.mode, 'hybrid', JSON.stringify(h.diagnostics))
    assert.equal(h.results[0].id, 'concepts/backups')
    fs.appendFileSync(path.join(v.wiki, 'concepts/tls.md'), '\nRotate the keys every year.\n')
    const re = (await addon.reindexWiki(paths, { components: ['lexical', 'vectors'] })).results[0].result
    assert.equal(re.ok, true, JSON.stringify(re.errors))
    const warning = re.warnings.find((w) => w.code === 'vectors_unavailable')
    assert.ok(warning && warning.message.includes('model.onnx'), JSON.stringify(re.warnings))
    assert.equal(re.vectors.generated, 0)
  })

  test('unloadable tokenizer: reindex warns tokenizer_unavailable and chunks by the estimate; a working one rebuilds once', async (t) => {
    const root = tmpDir(t)
    noPersonalVault(root)
    const v = makeVault(path.join(root, 'vault'), { pages: NOTES })
    const bad = tmpDir(t)
    for (const f of ['manifest.json', 'model.onnx', 'query.onnx']) fs.copyFileSync(path.join(int8, f), path.join(bad, f))
    fs.writeFileSync(path.join(bad, 'tokenizer.json'), Buffer.alloc(fs.statSync(path.join(int8, 'tokenizer.json')).size, 7))
    const reindex = async () => {
      const r = (await addon.reindexWiki({ root: v.root }, { components: ['lexical'] })).results[0].result
      assert.equal(r.ok, true, JSON.stringify(r.errors))
      return { rebuilt: r.fullRebuild, unavailable: r.warnings.filter((w) => w.code === 'tokenizer_unavailable').length }
    }
    useModels({ embedModel: bad })
    assert.deepEqual(await reindex(), { rebuilt: true, unavailable: 1 })
    assert.deepEqual(await reindex(), { rebuilt: false, unavailable: 1 })
    // The model's tokenizer loads again: the chunks are rebuilt with it once, then incremental.
    useModels()
    assert.deepEqual(await reindex(), { rebuilt: true, unavailable: 0 })
    assert.deepEqual(await reindex(), { rebuilt: false, unavailable: 0 })
  })

  test('missing vectors: recall continues on BM25 with a diagnostic; automatic stays quiet', async (t) => {
    useModels()
    const root = tmpDir(t)
    noPersonalVault(root)
    const v = makeVault(path.join(root, 'vault'), { pages: NOTES })
    await addon.reindexWiki({ root: v.root }, { components: ['lexical'] })
    const s = await addon.readIndexStatus({ root: v.root })
    assert.equal(s.hasVectorIndex, false)
    assert.ok(s.needsEmbedding > 0)
    const r = await addon.recallWiki({ root: v.root }, 'backup copies', { policy: EXPLICIT, mode: 'adaptive' })
    assert.equal(r.mode, 'lexical')
    assert.ok(r.diagnostics.some((d) => d.code === 'qmd_vectors_missing'))
    const auto = await addon.recallWiki({ root: v.root }, 'backup copies', {
      policy: { includePersonal: false, minScore: 0.5, maxPerVault: 10, maxResults: 3 },
      mode: 'hybrid',
    })
    assert.deepEqual(auto.diagnostics, [])
  })

  test('stale vectors after a model change: status stale (vectors), recall lexical, reindex re-embeds', async (t) => {
    useModels()
    const { paths, result } = await vectorVault(t)
    addon.configure({ modelRoots: [modelRoot], embedModel: fp32, threads: 2 })
    const s = await addon.readIndexStatus(paths)
    assert.equal(s.state, 'stale')
    assert.deepEqual(s.repairComponents, ['vectors'])
    assert.equal(s.models.embed, JSON.parse(fs.readFileSync(path.join(fp32, 'manifest.json'), 'utf8')).id)
    const r = await addon.recallWiki(paths, 'backup copies', { policy: EXPLICIT, mode: 'hybrid' })
    assert.equal(r.mode, 'lexical')
    assert.ok(r.diagnostics.some((d) => d.code === 'qmd_vectors_stale'))
    const re = (await addon.reindexWiki(paths, { components: ['vectors'] })).results[0].result
    assert.equal(re.vectors.generated, result.chunks.total)
    assert.equal(re.status.state, 'ready')
    const again = await addon.recallWiki(paths, 'backup copies', { policy: EXPLICIT, mode: 'hybrid' })
    assert.equal(again.mode, 'hybrid')
  })

  test('reranker: rescoring runs with a cross-encoder; a timeout keeps the fused list', async (t) => {
    useModels({ rerankModel: crossEncoder })
    const { paths } = await vectorVault(t)
    const ok = await addon.recallWiki(paths, 'backup copies off site', { policy: EXPLICIT, mode: 'quality' })
    assert.equal(ok.mode, 'quality')
    assert.ok(ok.trace.some((x) => x.includes('cross-encoder rescored')), ok.trace.join('\n'))
    assert.ok(ok.results.every((r) => r.matchReasons.some((m) => m.startsWith('cross-encoder'))))
    assert.equal((await addon.readIndexStatus(paths)).models.rerank, 'llm-wiki/test-cross-encoder-random-head:int8')
    const timedOut = await addon.recallWiki(paths, 'backup copies off site', { policy: EXPLICIT, mode: 'quality', rerankTimeoutMs: 0 })
    assert.equal(timedOut.mode, 'quality')
    assert.ok(timedOut.diagnostics.some((d) => d.code === 'reranker_timeout'), JSON.stringify(timedOut.diagnostics))
    assert.ok(timedOut.results.length > 0)
    assert.ok(timedOut.results.every((r) => !r.matchReasons.some((m) => m.startsWith('cross-encoder'))))
  })

  test('sentence-window rescoring is opt-in, reorders only with a budget, and a timeout keeps the fused list', async (t) => {
    useModels()
    const { paths } = await vectorVault(t)
    const q = 'which copy restored the photos after the disk failed'
    const plain = await addon.recallWiki(paths, q, { policy: EXPLICIT, mode: 'quality' })
    assert.ok(plain.trace.some((x) => x.includes('ranking by expanded fusion')), plain.trace.join('\n'))
    assert.ok(plain.results.every((r) => !r.matchReasons.some((m) => m.startsWith('sentence window'))))
    const rescored = await addon.recallWiki(paths, q, { policy: EXPLICIT, mode: 'quality', sentenceRescore: true })
    assert.equal(rescored.mode, 'quality')
    assert.ok(rescored.trace.some((x) => x.includes('sentence windows rescored')), rescored.trace.join('\n'))
    assert.ok(rescored.results.some((r) => r.matchReasons.some((m) => /^sentence window cosine 0\.\d{3}$/.test(m))))
    // Same pages, possibly reordered; confidence is the first stage's (absolute, not the window max).
    assert.deepEqual(rescored.results.map((r) => r.id).sort(), plain.results.map((r) => r.id).sort())
    const conf = Object.fromEntries(plain.results.map((r) => [r.id, r.confidence]))
    for (const r of rescored.results) assert.equal(r.confidence, conf[r.id])
    const timedOut = await addon.recallWiki(paths, q, { policy: EXPLICIT, mode: 'quality', sentenceRescore: true, rerankTimeoutMs: 0 })
    assert.ok(timedOut.diagnostics.some((d) => d.code === 'reranker_timeout'), JSON.stringify(timedOut.diagnostics))
    assert.deepEqual(timedOut.results.map((r) => r.id), plain.results.map((r) => r.id))
  })

  test('cancel during embedding keeps finished batches and the lexical index', async (t) => {
    useModels()
    const root = tmpDir(t)
    noPersonalVault(root)
    const pages = {}
    for (let i = 0; i < 700; i++) pages[`notes/n${i}.md`] = page({ title: `Note ${i}`, body: `Entry ${i} about topic ${i % 17}.` })
    const v = makeVault(path.join(root, 'vault'), { pages })
    const ctrl = new AbortController()
    const r = (
      await addon.reindexWiki(
        { root: v.root },
        {
          components: ['lexical', 'vectors'],
          signal: ctrl.signal,
          onProgress: ({ progress }) => {
            if (progress.stage === 'vectors' && progress.current >= 520) ctrl.abort()
          },
        },
      )
    ).results[0].result
    assert.equal(r.ok, false)
    assert.deepEqual(r.errors, [])
    assert.equal(r.status.totalDocuments, 700, 'lexical index committed before embedding')
    // Batches are sized to a few seconds of embedding (the first is 32 chunks), so at least the
    // first one finished and was kept; the one running at the abort was not.
    assert.ok(r.status.embeddedChunks >= 32 && r.status.embeddedChunks < 700, String(r.status.embeddedChunks))
    const rest = (await addon.reindexWiki({ root: v.root }, { components: ['vectors'] })).results[0].result
    assert.equal(rest.vectors.skipped, r.status.embeddedChunks)
    assert.equal(rest.vectors.generated, 700 - r.status.embeddedChunks)
    assert.equal(rest.status.needsEmbedding, 0)
  })
})
