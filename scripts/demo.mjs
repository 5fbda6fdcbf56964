// `npm run demo`: build the addon (and, when Python can, the default model into .models/, which
// the package entry point searches from a checkout), index the bundled example vault (copied to a
// temp dir so the repository stays clean), then show what the engine answers: ranked recall with
// mode, confidence and match reasons, one memory bundle, a zoom-out and an honest "no reliable
// memory". What it says about models comes from the engine (modelStatus and each answer's mode),
// never from what the setup step hoped for.
import { cpSync, mkdtempSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { ensureBuilt, ensureModels, ensureNodeModules, root } from './setup.mjs'

ensureNodeModules()
const fetched = ensureModels({ quiet: true })
ensureBuilt({ profile: 'ci' })
const engine = createRequire(import.meta.url)(root)

const status = engine.modelStatus()
const dense = Boolean(status.embedModel && status.onnxRuntimePath && status.denseEnabled)
if (dense) {
  console.log(`Models: ${status.embedModel} from ${status.embedDir}`)
} else {
  const why = !fetched.ok
    ? fetched.reason
    : status.onnxRuntimeError || (!status.embedModel ? 'no embedding model found' : 'dense retrieval is off')
  console.log(`Models unavailable, recall is lexical-only: ${why}`)
}

const vault = mkdtempSync(join(tmpdir(), 'llm-wiki-demo-'))
cpSync(join(root, 'examples', 'vault'), vault, { recursive: true })
const paths = { root: vault }
process.env.WIKI_HOME = join(vault, 'no-personal-vault') // keep the demo away from ~/.llm-wiki

console.log(`\n== Index: example vault copied to ${vault}`)
const reindex = await engine.reindexWiki(paths, {
  onProgress: ({ progress }) => {
    if (progress.total && progress.current === progress.total) console.log(`  ${progress.stage}: ${progress.current}/${progress.total}`)
  },
})
const r = reindex.results[0].result
console.log(`Indexed ${r.documents.indexed} pages (${r.chunks.total} chunks) in ${r.elapsedMs.toFixed(0)} ms; status ${r.status.state}`)
for (const w of r.warnings) console.log(`  warning ${w.code}: ${w.message}`)

const explicit = { includePersonal: false, minScore: 0.25, maxPerVault: 10, maxResults: 3 }
const automatic = { includePersonal: false, minScore: 0.5, maxPerVault: 10, maxResults: 3 }
const mode = 'adaptive'
const modes = new Set()

async function recall(label, query, policy) {
  const res = await engine.recallWiki(paths, query, { policy, mode })
  modes.add(res.mode)
  const fallback = res.vaultModes.find((v) => v.fallbackFrom)
  console.log(`\n[${label}] ${query}  (mode ${res.mode}${fallback ? `, fell back from ${fallback.fallbackFrom}: ${fallback.reason}` : ''})`)
  if (res.results.length === 0) console.log('  no reliable memory found: nothing passed the confidence floor, so nothing is injected')
  for (const hit of res.results) {
    console.log(`  ${hit.score.toFixed(2)} (confidence ${hit.confidence.toFixed(2)})  [[${hit.id}]] ${hit.title}`)
    console.log(`       matched: ${hit.matchReasons.join(', ')}`)
  }
  return res
}

console.log('\n== Recall (explicit policy: the user asked)')
console.log('  results in ranking order (reciprocal rank across vaults); the number is the calibrated score, absolute and comparable across queries')
await recall('explicit', 'how many backup copies should I keep off site?', explicit)
await recall('explicit', 'thiserror vs anyhow', explicit)

console.log('\n== Memory bundle: the card, its evidence and the competing claim')
const memory = await engine.recallMemory(paths, 'how many backup copies should I keep off site?', { policy: explicit, mode })
modes.add(memory.mode)
const bundle = memory.bundles[0]
const line = (c) => `[[${c.pageId}]] ${c.title} — ${c.relation}${c.relationDirection ? ` (${c.relationDirection})` : ''}${c.status ? `, status ${c.status}` : ''}`
if (bundle?.card) console.log(`  card:     ${line(bundle.card)}`)
for (const e of bundle?.evidence ?? []) console.log(`  evidence: ${line(e)}`)
for (const c of bundle?.conflicts ?? []) console.log(`  competing claim: ${line(c)}`)
for (const u of bundle?.unresolved ?? []) console.log(`  unresolved: ${u.pageIds.join(' vs ')} (${u.relation}); ask the user, then resolveConflict`)

console.log('\n== Zoom out: the neighbours of the card')
const around = await engine.neighbours(paths, bundle?.card?.pageId ?? 'concepts/backup-3-2-1', { depth: 1, direction: 'both' })
for (const e of around.outbound) console.log(`  → ${e.to}  (line ${e.line}${e.relations.length ? `, ${e.relations.map((x) => x.type).join(', ')}` : ''})`)
for (const e of around.inbound) console.log(`  ← ${e.from}  (line ${e.line}${e.relations.length ? `, ${e.relations.map((x) => x.type).join(', ')}` : ''})`)

console.log('\n== Automatic policy (the agent recalls on its own; precision first)')
await recall('automatic', 'zfs snapshot retention', automatic)
await recall('automatic', 'quarterly revenue forecast for the sales team', automatic)

const lexicalOnly = [...modes].every((m) => m === 'lexical')
console.log(
  `\nRecall modes used: ${[...modes].join(', ')}${lexicalOnly ? ' (lexical-only: no embedding model was usable)' : ''}; engine ${engine.engineInfo().version}`,
)
