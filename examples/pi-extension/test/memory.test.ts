// Automatic recall as memory bundles, on vaults written here (no shared data): a typed
// `contradicts` relation puts both claims in one injected bundle; a budget too small for any
// bundle falls back to the links-first block; an unrelated prompt injects nothing; every
// memory block stays within the automatic budget.
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { after, before, describe, test } from 'node:test'

import { automaticRecall, beforeAgentStart, wikiReindex, type ToolContext } from '../src/extension.js'
import { DEFAULT_RECALL_BUDGET_CHARS, charCount, memoryBlockOverhead } from '../src/format.js'

function page(fm: Record<string, string>, body: string, extra = ''): string {
  const lines = ['---', ...Object.entries(fm).map(([k, v]) => `${k}: ${JSON.stringify(v)}`)]
  if (extra) lines.push(extra)
  return [...lines, '---', '', body, ''].join('\n')
}

const pages: Record<string, string> = {
  'concepts/cache-ttl.md': page(
    { type: 'concept', title: 'Cache TTL is five minutes' },
    '## Claim\n\nThe zephyrcache entries expire after five minutes.\n\n## Related\n\nDisputed by [forever](cache-forever.md#claim).',
    'relations:\n  - target: concepts/cache-forever\n    type: contradicts',
  ),
  'concepts/cache-forever.md': page({ type: 'concept', title: 'Entries are kept forever' }, '## Claim\n\nEntries are kept until the process restarts.'),
  'sources/ttl-benchmark.md': page(
    { type: 'source', title: 'TTL measurement' },
    'Measured zephyrcache expiry at 300 seconds. See [[concepts/cache-ttl]].',
    'relations:\n  - target: concepts/cache-ttl\n    type: supports',
  ),
  'concepts/deploy.md': page({ type: 'concept', title: 'Deploy checklist' }, 'Tag the release, build the image, roll out to staging first.'),
  'concepts/logging.md': page({ type: 'concept', title: 'Logging format' }, 'Logs are JSON lines with a timestamp, a level and a message.'),
  'entities/postgres.md': page({ type: 'entity', title: 'Postgres' }, 'The primary database; backups run nightly.'),
}

let base: string
let ctx: ToolContext
before(async () => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'pi-memory-')))
  process.env.WIKI_HOME = join(base, 'no-personal-vault') // keep ~/.llm-wiki out of the results
  const root = join(base, 'vault')
  mkdirSync(join(root, '.llm-wiki', 'wiki'), { recursive: true })
  writeFileSync(join(root, '.llm-wiki', 'config.json'), JSON.stringify({ name: 'Memory test vault' }))
  for (const [rel, text] of Object.entries(pages)) {
    const file = join(root, '.llm-wiki', 'wiki', rel)
    mkdirSync(dirname(file), { recursive: true })
    writeFileSync(file, text)
  }
  ctx = { cwd: root, config: { retrievalMode: 'lexical' } }
  const r = await wikiReindex({ components: ['lexical'] }, ctx)
  assert.equal(r.isError, undefined, r.content[0]!.text)
})
after(() => rmSync(base, { recursive: true, force: true }))

const PROMPT = 'when do zephyrcache entries expire'

describe('automatic recall: memory bundles', () => {
  test('a contradiction is injected with both claims in one bundle, within the budget', async () => {
    const r = await automaticRecall(PROMPT, ctx)
    assert.equal(r.rendering, 'memory', JSON.stringify(r.diagnostics))
    const top = r.bundles[0]!
    assert.equal(top.card?.pageId, 'concepts/cache-ttl')
    assert.deepEqual(
      top.conflicts.map((c) => [c.pageId, c.relation]),
      [['concepts/cache-forever', 'contradicts']],
    )
    const c = r.content
    assert.ok(c.startsWith('## Relevant Wiki Knowledge (memory)\n\n_'), c)
    assert.ok(charCount(c) <= DEFAULT_RECALL_BUDGET_CHARS)
    // Both claims, their page ids and the competing-claim instruction sit in the first bundle.
    const first = c.slice(c.indexOf('## Memory 1\n'), c.includes('## Memory 2\n') ? c.indexOf('## Memory 2\n') : undefined)
    assert.match(first, /^Card: Cache TTL is five minutes \[concepts\/cache-ttl\] \(concept\)$/m)
    assert.match(first, /> The zephyrcache entries expire after five minutes\./)
    assert.match(first, /^Competing claim: Entries are kept forever \[concepts\/cache-forever\] \(concept\) — contradicts ← card$/m)
    assert.match(first, /> Entries are kept until the process restarts\./)
    assert.match(first, /^Evidence: TTL measurement \[sources\/ttl-benchmark\] \(source\)/m)
    assert.ok(first.includes('These claims compete; ask the user which applies'))
    assert.ok(c.endsWith(`\nPage files: \`read ${join(ctx.cwd, '.llm-wiki', 'wiki')}/<page id>.md\` (line ranges above). Add new findings via wiki_ensure_page or wiki_retro.\n`), c)
    // The before_agent_start hook injects exactly that block as a hidden tail message.
    const injected = await beforeAgentStart({ prompt: PROMPT }, ctx)
    assert.deepEqual(injected, { message: { customType: 'wiki-recall-context', content: c, display: false } })
  })

  test('every budget is kept: memory when the bundles fit, links-first when none does', async () => {
    const overhead = memoryBlockOverhead({ wikiDir: join(ctx.cwd, '.llm-wiki', 'wiki') })
    const seen = new Set<string>()
    for (const budget of [0, 50, overhead + 40, overhead + 400, overhead + 800, 2000, 4000, DEFAULT_RECALL_BUDGET_CHARS]) {
      const r = await automaticRecall(PROMPT, { ...ctx, config: { ...ctx.config, recallBudgetChars: budget } })
      seen.add(r.rendering)
      if (r.rendering === 'memory') {
        assert.ok(charCount(r.content) <= budget, `${budget}: ${charCount(r.content)}`)
        assert.equal(r.bundles[0]!.card?.pageId, 'concepts/cache-ttl')
        assert.ok(r.content.includes('[concepts/cache-forever]'), `${budget}: the contradiction is never dropped from its bundle`)
      } else {
        assert.equal(r.rendering, 'links', `${budget}`)
        assert.ok(r.diagnostics.some((d) => d.code === 'memory_budget_too_small'))
      }
    }
    assert.deepEqual([...seen].sort(), ['links', 'memory'])
  })

  test('a budget too small for any bundle falls back to links-first', async () => {
    const tiny = { ...ctx, config: { ...ctx.config, recallBudgetChars: 50 } }
    const r = await automaticRecall(PROMPT, tiny)
    assert.equal(r.rendering, 'links')
    assert.deepEqual(r.bundles, [])
    assert.ok(r.diagnostics.some((d) => d.code === 'memory_budget_too_small'), JSON.stringify(r.diagnostics))
    const lines = r.content.split('\n')
    assert.equal(lines[0], '## Relevant Wiki Knowledge (links-first)')
    assert.match(r.content, /^1\. \*\*\[\[concepts\/cache-ttl\]\]\*\* — \*concept\* — score \d\.\d — Cache TTL is five minutes — /m)
    assert.ok(r.content.includes(`   ↳ \`read ${join(ctx.cwd, '.llm-wiki', 'wiki', 'concepts', 'cache-ttl.md')}\``))
    assert.ok(!r.content.includes('Competing claim'))
    const injected = await beforeAgentStart({ prompt: PROMPT }, tiny)
    assert.equal(injected?.message.content, r.content)
  })

  test('an unrelated prompt injects nothing, whatever the budget', async () => {
    for (const recallBudgetChars of [50, DEFAULT_RECALL_BUDGET_CHARS]) {
      const c = { ...ctx, config: { ...ctx.config, recallBudgetChars } }
      const r = await automaticRecall('hotel trial balance audit', c)
      assert.deepEqual([r.rendering, r.content, r.bundles], ['none', '', []])
      assert.ok(!r.diagnostics.some((d) => d.code === 'memory_budget_too_small'))
      assert.equal(await beforeAgentStart({ prompt: 'hotel trial balance audit' }, c), undefined)
    }
    assert.equal((await automaticRecall('   ', ctx)).content, '')
  })
})
