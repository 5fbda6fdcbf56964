// `npm run demo`: build the addon, index the bundled example vault (copied to a temp dir so
// the repository stays clean), and recall a few queries under both policies.
import { cpSync, mkdtempSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { ensureBuilt, ensureModels, ensureNodeModules, root } from './setup.mjs'

ensureNodeModules()
const models = ensureModels()
ensureBuilt({ profile: 'ci' })
const engine = createRequire(import.meta.url)(root)

const vault = mkdtempSync(join(tmpdir(), 'llm-wiki-demo-'))
cpSync(join(root, 'examples', 'vault'), vault, { recursive: true })
const paths = { root: vault }
process.env.WIKI_HOME = join(vault, 'no-personal-vault') // keep the demo away from ~/.llm-wiki

console.log(`Example vault copied to ${vault}`)
const reindex = await engine.reindexWiki(paths, {
  onProgress: ({ progress }) => {
    if (progress.current === progress.total && progress.total) console.log(`  ${progress.stage}: ${progress.current}/${progress.total}`)
  },
})
const r = reindex.results[0].result
console.log(`Indexed ${r.documents.indexed} pages (${r.chunks.total} chunks) in ${r.elapsedMs.toFixed(0)} ms; status ${r.status.state}`)
for (const w of r.warnings) console.log(`  warning ${w.code}: ${w.message}`)

const explicit = { includePersonal: true, minScore: 0.25, maxPerVault: 10, maxResults: 3 }
const automatic = { includePersonal: false, minScore: 0.5, maxPerVault: 10, maxResults: 3 }
const queries = [
  ['explicit', 'how many backup copies should I keep off site?'],
  ['explicit', 'thiserror vs anyhow'],
  ['explicit', 'pi cluster control plane'],
  ['automatic', 'zfs snapshot retention'],
  ['automatic', 'quarterly revenue forecast for the sales team'],
]
for (const [policyName, query] of queries) {
  const policy = policyName === 'explicit' ? explicit : automatic
  const res = await engine.recallWiki(paths, query, { policy })
  console.log(`\n[${policyName}] ${query}  (mode ${res.mode})`)
  if (res.results.length === 0) console.log('  no reliable memory found')
  for (const hit of res.results) {
    console.log(`  ${hit.score.toFixed(2)}  [[${hit.id}]] ${hit.title} — ${hit.preview.slice(0, 90)}`)
  }
}
console.log(`\nModels ${models ? 'available' : 'unavailable (lexical only)'}; engine ${engine.engineInfo().version}`)
