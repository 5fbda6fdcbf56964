// Pack-test consumer (compiled and run by scripts/pack-test.mjs in a temporary project): uses the
// installed tarballs exactly as a strict TypeScript ESM application would.
import { createRequire } from 'node:module'
import path from 'node:path'
import engine from 'llm-wiki-retrieval'
import type { ModelStatus, RecallPolicy, RecallResponse, RecallWikiOptions, VaultPaths, WikiReindexResult } from 'llm-wiki-retrieval'

const [scenario, vault, modelRoot] = process.argv.slice(2)
if ((scenario !== 'lexical' && scenario !== 'dense') || !vault) throw new Error('usage: consumer.js lexical|dense <vault> [modelRoot]')

const explicit: RecallPolicy = { includePersonal: true, minScore: 0.25, maxPerVault: 10, maxResults: 5 }
const automatic: RecallPolicy = { includePersonal: false, minScore: 0.5, maxPerVault: 10, maxResults: 3 }
// @ts-expect-error an unknown retrieval mode is a type error
const invalid: RecallWikiOptions = { policy: explicit, mode: 'bm25' }
void invalid

function check(cond: unknown, what: string): asserts cond {
  if (!cond) throw new Error('check failed: ' + what)
}

const require = createRequire(import.meta.url)
const paths: VaultPaths = { root: vault }

async function main(): Promise<Record<string, unknown>> {
  if (scenario === 'dense') {
    check(modelRoot, 'model root argument')
    engine.configure({ modelRoots: [modelRoot], threads: 2 })
  }
  const models: ModelStatus = engine.modelStatus()
  const re: WikiReindexResult = await engine.reindexWiki(paths, { components: ['lexical', 'vectors'] })
  const r = re.results[0]?.result
  check(r && r.ok, 'reindex ok: ' + JSON.stringify(r?.errors))
  const warnings = r.warnings.map((w) => w.code)
  const mode = scenario === 'dense' ? 'hybrid' : 'lexical'
  const hit: RecallResponse = await engine.recallWiki(paths, 'zfs snapshot retention', { policy: explicit, mode })
  const neg: RecallResponse = await engine.recallWiki(paths, 'quarterly revenue forecast for the sales team', { policy: automatic })
  // The published binary has no test hooks: the panic marker is an ordinary query, and the
  // crash point the reindex above passed (LLM_WIKI_CRASH_AT) did nothing.
  const marker = process.env.LLM_WIKI_TEST_PANIC
  const marked: RecallResponse | undefined = marker ? await engine.recallWiki(paths, `${marker} zfs`, { policy: explicit, mode: 'lexical' }) : undefined
  const loaded = Object.keys(require.cache).filter((k) => k.endsWith('.node'))
  const out = {
    engine: engine.engineInfo().version,
    binding: loaded.map((k) => path.relative(process.cwd(), k)),
    onnxRuntimePath: models.onnxRuntimePath ?? null,
    onnxRuntimeError: models.onnxRuntimeError ?? null,
    embedModel: models.embedModel ?? null,
    documents: r.documents.indexed,
    chunks: r.chunks.total,
    vectorsGenerated: r.vectors.generated,
    warnings,
    recallMode: hit.mode,
    top: hit.results.map((x) => x.id + ' ' + x.score.toFixed(2)),
    diagnostics: hit.diagnostics.map((d) => d.code),
    automaticNegative: neg.results.length,
    reindexMs: Math.round(r.elapsedMs),
    hooks: { crashAt: process.env.LLM_WIKI_CRASH_AT ?? null, panicMarkerResolved: marked !== undefined, exports: Object.keys(engine).filter((k) => /debug|panic|crash/i.test(k)) },
  }
  check(loaded.some((k) => k.includes(path.join('node_modules', 'llm-wiki-retrieval-'))), 'binary loaded from the platform package')
  check(hit.results.length > 0 && hit.results[0]!.id === 'concepts/zfs-snapshots', 'top hit concepts/zfs-snapshots')
  check(neg.results.length === 0, 'automatic recall injects nothing for an unrelated prompt')
  check(out.hooks.exports.length === 0, 'no test-hook export: ' + out.hooks.exports.join())
  check(!marker || marked !== undefined, 'a recall carrying the test panic marker resolves')
  if (scenario === 'lexical') {
    check(models.onnxRuntimePath === undefined && models.onnxRuntimeError, 'no runtime library is found')
    check(warnings.includes('vectors_unavailable'), 'reindex warns vectors_unavailable')
    check(r.vectors.generated === 0, 'nothing embedded')
    check(hit.mode === 'lexical', 'lexical recall')
  } else {
    const ortDir = path.join('node_modules', 'onnxruntime-node') + path.sep
    check(models.onnxRuntimePath && models.onnxRuntimePath.includes(ortDir), 'runtime from node_modules/onnxruntime-node: ' + models.onnxRuntimePath)
    check(models.embedModel, 'embedder found in the model root')
    check(r.vectors.generated > 0 && r.vectors.generated === r.chunks.total, 'every chunk embedded')
    check(!warnings.includes('vectors_unavailable'), 'no vectors_unavailable warning')
    check(hit.mode === 'hybrid', 'hybrid recall reports mode hybrid, got ' + hit.mode)
    const status = await engine.readIndexStatus(paths)
    check(status.hasVectorIndex && status.needsEmbedding === 0, 'status reports the vector index')
    const after: ModelStatus = engine.modelStatus()
    check(after.onnxRuntimePath === models.onnxRuntimePath && after.loadedModels >= 1, 'the same runtime was loaded')
  }
  return out
}

main().then(
  (out) => console.log('RESULT ' + JSON.stringify(out)),
  (err: unknown) => {
    console.error(err)
    process.exitCode = 1
  },
)
