// The agent's orientation and graph exports (issue 42): wikiIndex from the index alone,
// graphQuery (typed relations first, competing claims together, historical pages marked,
// budgets), neighbours' token budget, linkPath's typed preference, and the bad inputs of all
// four (malformed and cross-vault ids, budgets of 0 and 10⁹, cycles and self-loops), plus the
// CLI's overview and graph commands.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { afterEach, beforeEach, describe, test } from 'node:test'

import { addon, makeTmp, makeVault, noPersonalVault, page, reindexOne, rmDir, runCli } from './helpers.mjs'

const { wikiIndex, graphQuery, neighbours, linkPath } = addon
addon.configure({ dense: false })

let base
beforeEach(() => {
  base = makeTmp()
  noPersonalVault(base)
})
afterEach(() => rmDir(base))

const rel = (...pairs) => ['relations:', ...pairs.map(([target, type]) => `  - target: ${target}\n    type: ${type}`)].join('\n')

const pages = {
  'concepts/cache-ttl.md': page({
    title: 'Cache TTL',
    tags: ['cache'],
    extra: rel(['concepts/cache-forever', 'contradicts'], ['concepts/eviction', 'supports']),
    body: 'Zephyrcache entries expire after ten minutes. See [[concepts/cache-forever]], [[concepts/eviction]] and [[concepts/plain-note]].',
  }),
  'concepts/cache-forever.md': page({ title: 'Cache forever', body: 'Zephyrcache entries are kept forever. Links [[concepts/cache-ttl]].' }),
  'concepts/eviction.md': page({ title: 'Eviction', extra: rel(['concepts/cache-ttl', 'supports']), body: 'Eviction [[concepts/cache-ttl]] and itself [[concepts/eviction]].' }),
  'concepts/plain-note.md': page({ title: 'Plain note', body: 'A plain link to [[concepts/far]].' }),
  'concepts/far.md': page({ title: 'Far', body: 'Links back to [[concepts/plain-note]].' }),
  'concepts/v1.md': page({ title: 'Protocol v1', body: 'The quorvex handshake, version one.' }),
  'concepts/v2.md': page({ title: 'Protocol v2', extra: rel(['concepts/v1', 'supersedes']), body: 'Quorvex handshake two replaces [[concepts/v1]].' }),
  'sources/bench.md': page({ type: 'source', title: 'TTL benchmark', extra: rel(['concepts/cache-ttl', 'supports']), body: 'Measured: [[concepts/cache-ttl]].' }),
  'concepts/a.md': page({ title: 'A', body: 'Start [[concepts/p]] [[concepts/q]].' }),
  'concepts/p.md': page({ title: 'P', body: 'Plain [[concepts/z]].' }),
  'concepts/q.md': page({ title: 'Q', extra: rel(['concepts/z', 'derived_from']), body: 'Typed [[concepts/z]].' }),
  'concepts/z.md': page({ title: 'Z', body: 'End.' }),
}

async function indexed() {
  const v = makeVault(path.join(base, 'vault'), { pages })
  const r = await reindexOne(v.paths)
  assert.equal(r.ok, true, JSON.stringify(r.errors))
  return v
}

const ids = (r) => r.pages.map((p) => p.id)

describe('wikiIndex', () => {
  test('orientation within ~500 tokens from the index alone', async () => {
    const v = await indexed()
    const before = await wikiIndex(v.paths)
    fs.rmSync(v.wiki, { recursive: true, force: true })
    const ix = await wikiIndex(v.paths)
    assert.equal(ix.text, before.text, 'no page file is read')
    assert.equal(ix.pages, 12)
    assert.equal(ix.historical, 1)
    assert.equal(ix.unresolvedConflicts, 1)
    assert.deepEqual(ix.conflicts[0], ['concepts/cache-forever', 'concepts/cache-ttl'])
    assert.equal(ix.mostLinked[0].id, 'concepts/cache-ttl')
    assert.ok(!ix.mostLinked.some((p) => p.id === 'concepts/v1'), 'historical pages are not listed as most linked')
    assert.deepEqual(ix.byType.map((c) => [c.name, c.pages]), [['concept', 11], ['source', 1]])
    assert.ok(ix.tokensUsed <= 500 && ix.budgetTokens === 500)
    const small = await wikiIndex(v.paths, { maxTokens: 40 })
    assert.ok(small.tokensUsed <= 40 && small.truncated)
    const huge = await wikiIndex(v.paths, { maxTokens: 1e9 })
    assert.equal(huge.budgetTokens, 4000)
    assert.equal(huge.diagnostics[0].code, 'budget_clamped')
    for (const bad of [0, -1, 1.5, NaN]) {
      await assert.rejects(wikiIndex(v.paths, { maxTokens: bad }), (e) => e.code === 'invalid_argument', String(bad))
    }
  })

  test('an unindexed vault is a diagnostic, not a rejection', async () => {
    const v = makeVault(path.join(base, 'empty'), { pages: { 'a.md': page({ title: 'A', body: 'x' }) } })
    const ix = await wikiIndex(v.paths)
    assert.equal(ix.pages, 0)
    assert.equal(ix.diagnostics.length, 1)
  })
})

describe('graphQuery', () => {
  test('typed relations first, competing claims together, superseded pages historical', async () => {
    const v = await indexed()
    const r = await graphQuery(v.paths, 'zephyrcache expire', { mode: 'lexical' })
    assert.ok(ids(r).includes('concepts/cache-ttl') && ids(r).includes('concepts/cache-forever'), ids(r).join())
    assert.equal(r.pages[0].why, 'seed')
    const ev = r.pages.find((p) => p.id === 'concepts/eviction')
    assert.equal(ev.relation, 'supports')
    assert.ok(r.edges.some((e) => e.relations.includes('contradicts')))
    assert.ok(r.tokensUsed <= r.budgetTokens && r.budgetTokens === 2000 && r.hops === 2)
    assert.match(r.text, /## Edges/)
    const h = await graphQuery(v.paths, 'quorvex handshake', { mode: 'lexical', hops: 1 })
    const v1 = h.pages.find((p) => p.id === 'concepts/v1')
    assert.ok(v1.historical)
    assert.deepEqual(v1.supersededBy, ['concepts/v2'])
    for (const budgetTokens of [30, 45, 60, 90]) {
      const b = await graphQuery(v.paths, 'zephyrcache expire', { mode: 'lexical', budgetTokens })
      const has = (id) => b.pages.some((p) => p.id === id)
      assert.equal(has('concepts/cache-ttl'), has('concepts/cache-forever'), `budget ${budgetTokens}: both or neither`)
      assert.ok(b.tokensUsed <= budgetTokens)
    }
  })

  test('budgets, hops and seeds out of range; no hit', async () => {
    const v = await indexed()
    const huge = await graphQuery(v.paths, 'zephyrcache', { mode: 'lexical', budgetTokens: 1e9, hops: 99 })
    assert.equal(huge.budgetTokens, 10000)
    assert.equal(huge.hops, 4)
    const codes = huge.diagnostics.map((d) => d.code)
    assert.ok(codes.includes('budget_clamped') && codes.includes('hops_clamped'), codes.join())
    await assert.rejects(graphQuery(v.paths, 'zephyrcache', { budgetTokens: 0 }), (e) => e.code === 'invalid_argument')
    await assert.rejects(graphQuery(v.paths, 'zephyrcache', { seeds: 0 }), (e) => e.code === 'invalid_argument')
    const seedsOnly = await graphQuery(v.paths, 'zephyrcache expire', { mode: 'lexical', hops: 0, seeds: 1 })
    assert.ok(seedsOnly.pages.every((p) => p.why === 'seed' || p.why === 'competing'))
    const none = await graphQuery(v.paths, 'xylophone marmalade', { mode: 'lexical' })
    assert.equal(none.pages.length, 0)
    assert.equal(none.diagnostics[0].code, 'graph_no_seeds')
    await assert.rejects(graphQuery(v.paths, '   ', { mode: 'lexical' }), (e) => typeof e.code === 'string' && e.code.length > 0)
  })
})

describe('neighbours and linkPath', () => {
  test('a token budget, canonical and typed first, sentence cuts', async () => {
    const v = await indexed()
    const n = await neighbours(v.paths, 'concepts/cache-ttl')
    assert.equal(n.budgetTokens, 2000)
    assert.equal(n.outbound.at(-1).to, 'concepts/plain-note', 'typed relations before the plain link')
    assert.ok(n.tokensUsed <= 2000 && n.text.includes('—contradicts→'))
    const small = await neighbours(v.paths, 'concepts/cache-ttl', { budgetTokens: 45 })
    assert.ok(small.truncated && small.tokensUsed <= 45)
    const huge = await neighbours(v.paths, 'concepts/cache-ttl', { budgetTokens: 1e9 })
    assert.equal(huge.budgetTokens, 10000)
    assert.equal(huge.diagnostics[0].code, 'budget_clamped')
    await assert.rejects(neighbours(v.paths, 'concepts/cache-ttl', { budgetTokens: 0 }), (e) => e.code === 'invalid_argument')
    const loop = await neighbours(v.paths, 'concepts/eviction', { depth: 3 })
    assert.ok(!loop.outbound.some((e) => e.from === e.to))
    const hist = await neighbours(v.paths, 'concepts/v2')
    assert.equal(hist.pages.find((p) => p.id === 'concepts/v1').historical, true)
  })

  test('typed relations win ties; same page; bad and cross-vault ids', async () => {
    const v = await indexed()
    const p = await linkPath(v.paths, 'concepts/a', 'concepts/z')
    assert.deepEqual(ids(p), ['concepts/a', 'concepts/q', 'concepts/z'])
    const same = await linkPath(v.paths, 'concepts/a', 'concepts/a')
    assert.ok(same.found && same.hops.length === 0)
    assert.equal(same.diagnostics[0].code, 'path_same_page')
    const cycle = await linkPath(v.paths, 'concepts/far', 'concepts/cache-ttl', { maxHops: 8 })
    assert.ok(cycle.found)
    for (const bad of ['../etc/passwd', '/etc/passwd', 'concepts/../../x', '']) {
      await assert.rejects(linkPath(v.paths, bad, 'concepts/a'), (e) => e.code === 'invalid_argument', bad)
      await assert.rejects(neighbours(v.paths, bad), (e) => e.code === 'invalid_argument', bad)
    }
    await assert.rejects(linkPath(v.paths, 'personal:concepts/a', 'concepts/z'), (e) => e.code === 'graph_cross_vault')
    await assert.rejects(
      linkPath(v.paths, 'concepts/a', '11111111-2222-4333-8444-555555555555:concepts/z'),
      (e) => e.code === 'graph_cross_vault',
    )
    const unknown = await linkPath(v.paths, 'concepts/a', 'concepts/nope')
    assert.equal(unknown.diagnostics[0].code, 'page_not_found')
  })

  test('CLI: overview and graph', async () => {
    const v = await indexed()
    const o = await runCli(['overview', v.paths.root])
    assert.equal(o.code, 0, o.stderr)
    assert.match(o.stdout, /# Wiki index \(12 pages/)
    const g = await runCli(['graph', v.paths.root, 'zephyrcache expire', '--mode', 'lexical', '--json'])
    assert.equal(g.code, 0, g.stderr)
    assert.ok(JSON.parse(g.stdout).pages.some((p) => p.id === 'concepts/cache-forever'))
    const bad = await runCli(['graph', v.paths.root, 'zephyrcache', '--budget-tokens', '0'])
    assert.notEqual(bad.code, 0)
  })
})
