// A plain folder of Markdown notes through the package (JS API) and the npm bin (CLI): an
// uninitialised folder is refused with the command to run and nothing written; `initVault` /
// `init` create only .llm-wiki-retrieval/; index + recall then find the example's backup page.
// The checkout's .models/ is a model root (index.js → addModelRoots).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import test from 'node:test'

import { addon, noPersonalVault, repoRoot, runCli, tmpDir } from './helpers.mjs'

const QUERY = 'how many backup copies should I keep off site?'
const POLICY = { includePersonal: false, minScore: 0, maxPerVault: 10, maxResults: 3 }

function flatExamples(dir) {
  const wiki = path.join(repoRoot, 'examples', 'vault', '.llm-wiki', 'wiki')
  for (const f of fs.readdirSync(wiki, { recursive: true })) {
    if (f.endsWith('.md') && path.basename(f) !== 'log.md') fs.copyFileSync(path.join(wiki, f), path.join(dir, path.basename(f)))
  }
  fs.mkdirSync(path.join(dir, '.obsidian'))
  fs.writeFileSync(path.join(dir, '.obsidian', 'workspace.md'), 'backup copies off site hidden\n')
}

test('JS API: initVault, then reindex and recall a flat folder of notes', async (t) => {
  const dir = tmpDir(t)
  noPersonalVault(dir)
  const notes = path.join(dir, 'notes')
  fs.mkdirSync(notes)
  flatExamples(notes)
  const before = fs.readdirSync(notes).sort()
  const refused = await addon.reindexWiki({ root: notes }, { components: ['lexical'] })
  const err = refused.results[0].result.errors[0]
  // reindexWiki keeps the client's code for a missing vault; its message names init.
  assert.equal(err.code, 'config_invalid_knowledge_format')
  assert.match(err.message, /llm-wiki-retrieval init/)
  assert.deepEqual(fs.readdirSync(notes).sort(), before, 'nothing written before init')

  const init = await addon.initVault(notes)
  assert.equal(init.layout, 'plain')
  const store = path.join(notes, '.llm-wiki-retrieval')
  assert.deepEqual(init.created, [store, path.join(store, '.gitignore'), path.join(store, 'config.json')])
  assert.equal((await addon.initVault(notes)).created.length, 0, 'idempotent')
  await assert.rejects(addon.initVault(path.join(dir, 'missing')), { code: 'vault_init_not_found' })
  await assert.rejects(addon.initVault('relative/notes'), { code: 'invalid_argument' })

  const r = (await addon.reindexWiki({ root: notes }, { components: ['lexical'] })).results[0].result
  assert.equal(r.ok, true, JSON.stringify(r.errors))
  assert.equal(r.documents.indexed, 11)
  const res = await addon.recallWiki({ root: notes }, QUERY, { policy: POLICY, mode: 'lexical' })
  assert.equal(res.results[0].id, 'backup-3-2-1')
  assert.ok(!res.results.some((h) => h.id.includes('workspace')))
})

test('CLI: init, index and recall a flat folder of notes', async (t) => {
  const dir = tmpDir(t)
  const notes = path.join(dir, 'notes')
  fs.mkdirSync(notes)
  flatExamples(notes)
  const env = { ...process.env, WIKI_HOME: path.join(dir, 'no-personal-vault') }
  const refused = await runCli(['index', notes, '--component', 'lexical'], { env })
  assert.match(refused.stdout + refused.stderr, /llm-wiki-retrieval init/)
  const init = await runCli(['init', notes], { env })
  assert.equal(init.code, 0, init.stderr)
  assert.match(init.stdout, /\.llm-wiki-retrieval/)
  const index = await runCli(['index', notes, '--component', 'lexical'], { env })
  assert.equal(index.code, 0, index.stderr)
  assert.match(index.stdout, /^ok: 11 indexed/m)
  const recall = await runCli(['recall', notes, QUERY, '--mode', 'lexical', '--json'], { env })
  assert.equal(recall.code, 0, recall.stderr)
  assert.equal(JSON.parse(recall.stdout).results[0].id, 'backup-3-2-1')
})

test('the checkout .models/ is a model root when it exists', () => {
  const status = addon.modelStatus()
  if (fs.existsSync(path.join(repoRoot, '.models', 'all-MiniLM-L6-v2-int8', 'manifest.json')) && !process.env.LLM_WIKI_EMBED_MODEL) {
    assert.ok(status.embedDir, 'an embedder is found without LLM_WIKI_MODELS_DIR')
  }
  assert.equal(typeof addon.addModelRoots, 'function')
})
