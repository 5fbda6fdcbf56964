// Golden outputs of formatRecallContext for a fixed results array. The expected strings are
// written out by hand from the contract's rules (pi-contract §5.3): header and layered label,
// skill nudge, preview lines cut at 120 chars, links-first lines with score toFixed(1) and an
// 80-char one-line snippet, `read` paths, skill/case bodies inlined (frontmatter stripped,
// CRLF normalized, cut at skillInlineMax) inside a fence longer than any inner backtick run.
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'

import { charCount, fenceFor, formatMemoryContext, formatRecallContext, memoryBlockOverhead, type RenderableResult } from '../src/format.js'

const dir = mkdtempSync(join(tmpdir(), 'pi-format-'))
after(() => rmSync(dir, { recursive: true, force: true }))
mkdirSync(join(dir, 'skills'))
const skillPath = join(dir, 'skills', 'rotate-tls.md')
writeFileSync(skillPath, '---\r\ntype: skill\r\ntitle: Rotate TLS\r\n---\r\n# Rotate TLS\r\n\r\nRun:\r\n\r\n```sh\r\ncertbot renew\r\n```\r\n')

const concept: RenderableResult = {
  id: 'concepts/hybrid-retrieval',
  title: 'Hybrid retrieval',
  type: 'concept',
  preview:
    '#How it works — Hybrid retrieval runs BM25 and dense vector search side by side, then fuses both ranked lists with reciprocal rank fusion before the floor.',
  path: '/vault/.llm-wiki/wiki/concepts/hybrid-retrieval.md',
  score: 0.934,
}
const skill: RenderableResult = {
  id: 'skills/rotate-tls',
  title: 'Rotate TLS',
  type: 'skill',
  preview: '#Rotate TLS —\n  Run certbot',
  path: skillPath,
  score: 0.61,
  vaultLabel: '📓 personal',
}
const entity: RenderableResult = {
  id: 'entities/qmd',
  title: 'QMD',
  type: 'entity',
  preview: '',
  path: '/vault/.llm-wiki/wiki/entities/qmd.md',
  score: 0.25,
}

describe('formatRecallContext', () => {
  test('no results render nothing', () => {
    assert.equal(formatRecallContext([]), '')
    assert.equal(formatRecallContext([], { linksOnly: true }), '')
  })

  test('preview variant, project only, no skill', () => {
    const expected =
      '## Relevant Wiki Knowledge\n' +
      '\n' +
      '_2 page(s) matched your query._\n' +
      '\n' +
      '- **[[concepts/hybrid-retrieval]]** — *concept* — Hybrid retrieval\n' +
      '  #How it works — Hybrid retrieval runs BM25 and dense vector search side by side, then fuses both ranked lists with recip…\n' +
      '\n' +
      '- **[[entities/qmd]]** — *entity* — QMD\n' +
      '\n' +
      'Use `read` to view full pages. Add new findings via wiki_ensure_page or wiki_retro.\n'
    assert.equal(formatRecallContext([concept, entity]), expected)
  })

  test('preview variant with a personal skill: label, nudge, inlined body in a longer fence', () => {
    const expected =
      '## Relevant Wiki Knowledge\n' +
      '\n' +
      '⚠️ A distilled skill/case below matches this task — read and APPLY it BEFORE experimenting on your own.\n' +
      '\n' +
      '_3 page(s) matched your query (personal + project)._\n' +
      '\n' +
      '- **[[concepts/hybrid-retrieval]]** — *concept* — Hybrid retrieval\n' +
      '  #How it works — Hybrid retrieval runs BM25 and dense vector search side by side, then fuses both ranked lists with recip…\n' +
      '\n' +
      '- **[[skills/rotate-tls]]** — *skill* — Rotate TLS 📓 personal\n' +
      `  ↳ \`read ${skillPath}\`\n` +
      '\n' +
      '  ````\n' +
      '  # Rotate TLS\n' +
      '  \n' +
      '  Run:\n' +
      '  \n' +
      '  ```sh\n' +
      '  certbot renew\n' +
      '  ```\n' +
      '  ````\n' +
      '\n' +
      '- **[[entities/qmd]]** — *entity* — QMD\n' +
      '\n' +
      'Use `read` to view full pages. Add new findings via wiki_ensure_page or wiki_retro.\n'
    assert.equal(formatRecallContext([concept, skill, entity]), expected)
  })

  test('links-first variant: scores, 80-char snippets, read paths, truncated skill body', () => {
    const expected =
      '## Relevant Wiki Knowledge (links-first)\n' +
      '\n' +
      '⚠️ A distilled skill/case below matches this task — read and APPLY it BEFORE experimenting on your own.\n' +
      '\n' +
      '_3 page(s) matched your query (personal + project), ranked. Two-stage recall: links only — open the ones you need to read their full content._\n' +
      '\n' +
      '1. **[[concepts/hybrid-retrieval]]** — *concept* — score 0.9 — Hybrid retrieval — #How it works — Hybrid retrieval runs BM25 and dense vector search side by side,…\n' +
      '   ↳ `read /vault/.llm-wiki/wiki/concepts/hybrid-retrieval.md`\n' +
      '2. **[[skills/rotate-tls]]** — *skill* — score 0.6 📓 personal — Rotate TLS — #Rotate TLS — Run certbot\n' +
      `   ↳ \`read ${skillPath}\`\n` +
      '\n' +
      '   ````\n' +
      '   # Rotate TLS\n' +
      '   \n' +
      '   Run:\n' +
      '   \n' +
      '   ```sh\n' +
      '   cert\n' +
      '   …(truncated — `read` the path above for the full page)\n' +
      '   ````\n' +
      '3. **[[entities/qmd]]** — *entity* — score 0.3 — QMD\n' +
      '   ↳ `read /vault/.llm-wiki/wiki/entities/qmd.md`\n' +
      '\n' +
      'Call `read` on the exact path shown under each link to pull its full content. Add new findings via wiki_ensure_page or wiki_retro.\n'
    assert.equal(formatRecallContext([concept, skill, entity], { linksOnly: true, skillInlineMax: 30 }), expected)
  })

  test('skillInlineMax 0 disables inlining (the nudge stays); an unreadable skill falls back to its preview', () => {
    const expected =
      '## Relevant Wiki Knowledge\n' +
      '\n' +
      '⚠️ A distilled skill/case below matches this task — read and APPLY it BEFORE experimenting on your own.\n' +
      '\n' +
      '_1 page(s) matched your query (personal + project)._\n' +
      '\n' +
      '- **[[skills/rotate-tls]]** — *skill* — Rotate TLS 📓 personal\n' +
      '  #Rotate TLS —\n' +
      '  Run certbot\n' +
      '\n' +
      'Use `read` to view full pages. Add new findings via wiki_ensure_page or wiki_retro.\n'
    assert.equal(formatRecallContext([skill], { skillInlineMax: 0 }), expected)
    assert.equal(formatRecallContext([{ ...skill, path: join(dir, 'missing.md') }]), expected)
    // A `cases/` id counts as a skill/case whatever its type; with inlining disabled in links-first.
    const linkCase =
      '## Relevant Wiki Knowledge (links-first)\n' +
      '\n' +
      '⚠️ A distilled skill/case below matches this task — read and APPLY it BEFORE experimenting on your own.\n' +
      '\n' +
      '_1 page(s) matched your query, ranked. Two-stage recall: links only — open the ones you need to read their full content._\n' +
      '\n' +
      '1. **[[cases/outage-2024]]** — *page* — score 1.0 — Outage — #Timeline — DNS failed first\n' +
      '   ↳ `read /v/cases/outage-2024.md`\n' +
      '\n' +
      'Call `read` on the exact path shown under each link to pull its full content. Add new findings via wiki_ensure_page or wiki_retro.\n'
    const c: RenderableResult = { id: 'cases/outage-2024', title: 'Outage', type: 'page', preview: '#Timeline — DNS failed first', path: '/v/cases/outage-2024.md', score: 1 }
    assert.equal(formatRecallContext([c], { linksOnly: true, skillInlineMax: 0 }), linkCase)
  })

  test('the fence is longer than any backtick run of the body', () => {
    assert.equal(fenceFor('plain'), '```')
    assert.equal(fenceFor('a `b` ```c```'), '````')
    assert.equal(fenceFor('x `````y'), '``````')
  })
})

describe('formatMemoryContext', () => {
  const wikiDir = '/v/.llm-wiki/wiki'
  const context = '## Memory 1\nCard: Cache TTL [concepts/cache-ttl] (concept)\n  concepts/cache-ttl:7-7 #Claim\n  > Five minutes.\n'

  test('no bundle renders nothing', () => {
    assert.equal(formatMemoryContext({ bundles: [], context: '' }, { wikiDir }), '')
    assert.equal(formatMemoryContext({ bundles: [], context: '- Cache TTL [concepts/cache-ttl] (concept)\n' }, { wikiDir }), '')
  })

  test('header, the engine context verbatim, footer with the page directory', () => {
    const expected =
      '## Relevant Wiki Knowledge (memory)\n' +
      '\n' +
      '_1 memory bundle(s) matched your query: each card comes with its evidence and competing claims._\n' +
      '\n' +
      context +
      '\n' +
      'Page files: `read /v/.llm-wiki/wiki/<page id>.md` (line ranges above). Add new findings via wiki_ensure_page or wiki_retro.\n'
    const bundle = { card: { pageId: 'concepts/cache-ttl', type: 'concept' }, evidence: [], conflicts: [] }
    assert.equal(formatMemoryContext({ bundles: [bundle], context }, { wikiDir }), expected)
  })

  test('skill nudge and layered label; the overhead bounds header and footer', () => {
    const skill = { card: { pageId: 'skills/rotate-tls', type: 'skill', vaultLabel: '📓 personal' }, evidence: [], conflicts: [] }
    const out = formatMemoryContext({ bundles: [skill, skill, skill], context: context.trimEnd() }, { wikiDir })
    assert.ok(out.startsWith('## Relevant Wiki Knowledge (memory)\n\n⚠️ A distilled skill/case below matches this task'), out)
    assert.ok(out.includes('_3 memory bundle(s) matched your query (personal + project): '))
    assert.ok(out.includes(`${context.trimEnd()}\n\nPage files: `))
    assert.equal(charCount(out) - charCount(context), memoryBlockOverhead({ wikiDir }) - 2)
    assert.equal(charCount('⚠️x'), 3)
  })
})
