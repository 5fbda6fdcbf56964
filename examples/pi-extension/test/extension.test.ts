// The extension's call sites on a small vault committed beside this test (test/vault: 12 pages
// about a fictional search service, written for these tests): explicit wiki_recall, automatic
// before_agent_start, MCP/Pi parity, wiki_reindex and wiki_status.
import assert from 'node:assert/strict'
import { cpSync, existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { after, before, describe, test } from 'node:test'

import engine from 'llm-wiki-retrieval'
import type { IndexStatus, RecallResult, WikiReindexResult } from 'llm-wiki-retrieval'

import {
  automaticRecallContext,
  beforeAgentStart,
  mcpWikiRecall,
  recallOperation,
  wikiRecall,
  wikiReindex,
  wikiStatus,
  type ToolContext,
} from '../src/extension.js'

// dist/test/extension.test.js → the example's root is two levels up; the vault is test/vault.
const source = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'test', 'vault')
const PAGES = 12

let base: string
let ctx: ToolContext
before(() => {
  assert.ok(existsSync(join(source, '.llm-wiki', 'config.json')), `test vault missing at ${source}`)
  base = realpathSync(mkdtempSync(join(tmpdir(), 'pi-extension-')))
  process.env.WIKI_HOME = join(base, 'no-personal-vault') // keep ~/.llm-wiki out of the results
  cpSync(source, join(base, 'vault'), { recursive: true })
  ctx = { cwd: join(base, 'vault') }
})
after(() => rmSync(base, { recursive: true, force: true }))

const text = (r: { content: Array<{ text: string }> }) => r.content.map((c) => c.text).join('')

describe('pi extension call sites', () => {
  test('wiki_reindex builds the index; invalid arguments and missing vaults are tool errors', async () => {
    const r = await wikiReindex({}, ctx)
    assert.equal(r.isError, undefined, text(r))
    const details = r.details as { scope: string; components: string[]; vault: string; results: WikiReindexResult['results'] }
    assert.deepEqual([details.scope, details.components, details.vault], ['changed', ['lexical', 'vectors'], 'active'])
    assert.equal(details.results.length, 1)
    assert.equal(details.results[0]!.result.ok, true)
    assert.equal(details.results[0]!.result.documents.indexed, PAGES)
    assert.match(text(r), new RegExp(`^wiki_reindex scope=changed components=\\["lexical","vectors"\\] vault=active\\n✅ active vault .*: ${PAGES} indexed, 0 updated, 0 unchanged, 0 removed; `))

    const again = await wikiReindex({ scope: 'changed', components: ['lexical'], force: false, vault: 'active' }, ctx)
    assert.equal((again.details as { results: WikiReindexResult['results'] }).results[0]!.result.documents.unchanged, PAGES)

    for (const bad of [{ components: [] }, { components: ['lexical', 'lexical'] }, { scope: 'some' }, { vault: 'everything' }]) {
      const e = await wikiReindex(bad as never, ctx)
      assert.equal(e.isError, true, JSON.stringify(bad))
      assert.equal(e.details.error, 'invalid_arguments')
    }
    const none = await wikiReindex({}, { cwd: join(base, 'no-personal-vault') })
    assert.equal(none.isError, true)
    assert.equal(none.details.error, 'no_vault')
  })

  test('wiki_status renders the index lines and carries the full status in details.qmd', async () => {
    const r = await wikiStatus(ctx)
    const qmd = r.details.qmd as IndexStatus
    assert.equal(qmd.totalDocuments, PAGES)
    assert.equal(qmd.canonicalDocuments + qmd.evidenceDocuments, PAGES)
    const lines = text(r).split('\n')
    assert.deepEqual(lines.slice(0, 6), [
      '📊 LLM Wiki Status',
      '══════════════════',
      `QMD index: ${qmd.state}`,
      `QMD documents: ${PAGES} (${qmd.canonicalDocuments} canonical, ${qmd.evidenceDocuments} evidence)`,
      `QMD embeddings pending: ${qmd.needsEmbedding}`,
      `QMD package: ${engine.engineInfo().version}`,
    ])
    assert.equal(qmd.state, 'ready')
  })

  test('explicit wiki_recall: entities/larkspur first for "Larkspur", preview rendering below the links threshold', async () => {
    const r = await wikiRecall({ query: 'Larkspur' }, ctx)
    assert.equal(r.isError, undefined)
    const matches = r.details.matches as RecallResult[]
    assert.equal(matches[0]!.id, 'entities/larkspur')
    assert.ok(matches.length >= 1 && matches.length <= 5)
    assert.equal(r.details.mode, 'preview')
    const first = matches[0]!
    assert.ok(
      text(r).startsWith(
        `Found ${matches.length} wiki page(s) matching "Larkspur":\n\n## [[entities/larkspur]] — ${first.title}\nType: ${first.type}\nPath: ${first.path}\n\n${first.preview}`,
      ),
      text(r),
    )
    assert.equal(first.path, join(ctx.cwd, '.llm-wiki', 'wiki', 'entities', 'larkspur.md'))
    // max_results is capped at 10.
    const many = await wikiRecall({ query: 'retrieval', max_results: 50 }, ctx)
    assert.ok((many.details.matches as RecallResult[]).length <= 10)
  })

  test('explicit wiki_recall in links-first mode above the threshold', async () => {
    const r = await wikiRecall({ query: 'Larkspur', max_results: 3 }, { ...ctx, config: { recallLinksThreshold: 10 } })
    assert.equal(r.details.mode, 'links')
    const m = (r.details.matches as RecallResult[])[0]!
    const lines = text(r).split('\n')
    assert.match(lines[0]!, /^Found [1-3] wiki page\(s\) matching "Larkspur" \(two-stage recall — ranked links, expand on demand\):$/)
    assert.equal(lines[2], `1. [[entities/larkspur]] — ${m.title} (${m.type}, score ${m.score.toFixed(1)})`)
    assert.ok(lines[3]!.startsWith(`   Path: ${m.path} — `))
  })

  test('automatic before_agent_start injects nothing for an unrelated prompt', async () => {
    assert.equal(await automaticRecallContext('hotel trial balance audit', ctx), '')
    assert.equal(await beforeAgentStart({ prompt: 'hotel trial balance audit' }, ctx), undefined)
    assert.equal(await automaticRecallContext('   ', ctx), '')
  })

  test('automatic before_agent_start injects a hidden recall block for a matching prompt', async () => {
    const injected = await beforeAgentStart({ prompt: 'what is the Larkspur search service' }, ctx)
    assert.ok(injected)
    assert.equal(injected.message.customType, 'wiki-recall-context')
    assert.equal(injected.message.display, false)
    const content = injected.message.content
    // Memory bundles (they fit the 8,000-character automatic budget), the Larkspur card first.
    assert.ok(content.startsWith('## Relevant Wiki Knowledge (memory)\n\n_'), content)
    assert.match(content, /\n## Memory 1\nCard: [^\n]* \[entities\/larkspur\] \(/)
    assert.ok(content.length <= 8000)
    assert.ok(content.endsWith('Add new findings via wiki_ensure_page or wiki_retro.\n'))
  })

  test('MCP recallOperation and Pi wiki_recall return the same structured results', async () => {
    for (const query of ['Larkspur', 'reciprocal rank fusion', 'which node version do we run', 'hotel trial balance audit']) {
      for (const max of [undefined, 3, 10]) {
        const pi = await wikiRecall(max === undefined ? { query } : { query, max_results: max }, ctx)
        const mcp = await recallOperation(engine.resolveVaultPaths(ctx.cwd), query, Math.min(max ?? 5, 10))
        assert.deepEqual(mcp.results, pi.details.matches, `${query} / ${max}`)
        const tool = await mcpWikiRecall(max === undefined ? { query } : { query, max_results: max }, { root: ctx.cwd })
        const json = tool.content[0]!.text.split('\n⚠️')[0]!
        assert.deepEqual(JSON.parse(json), JSON.parse(JSON.stringify(pi.details.matches)))
      }
    }
  })
})
