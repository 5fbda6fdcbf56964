// recallMemory, neighbours and linkPath on vaults written for the purpose: typed relations and
// their lint, contradiction and supersession bundles, budget edges, the link graph and its
// incremental update, and hostile inputs (cycles, dangling and cross-vault targets, 10,000 links).
import assert from 'node:assert/strict'
import path from 'node:path'
import { afterEach, beforeEach, describe, test } from 'node:test'

import { AUTOMATIC, EXPLICIT, addon, editPage, makeTmp, makeVault, noPersonalVault, page, reindexOne, rmDir, runCli } from './helpers.mjs'

const { recallMemory, neighbours, linkPath, readIndexStatus } = addon
addon.configure({ dense: false })

let base
beforeEach(() => {
  base = makeTmp()
  noPersonalVault(base)
})
afterEach(() => rmDir(base))

const rel = (...pairs) => ['relations:', ...pairs.map(([target, type, scope]) => `  - target: ${target}\n    type: ${type}${scope ? `\n    scope: ${scope}` : ''}`)].join('\n')

async function indexed(dir, pages) {
  const v = makeVault(path.join(base, dir), { pages })
  const r = await reindexOne(v.paths)
  assert.equal(r.ok, true, JSON.stringify(r.errors))
  return { v, r }
}

const memory = (paths, q, opts = {}) => recallMemory(paths, q, { policy: EXPLICIT, mode: 'lexical', ...opts })

const claims = {
  'concepts/cache-ttl.md': page({
    title: 'Cache TTL is five minutes',
    extra: rel(['concepts/cache-forever', 'contradicts']),
    body: '## Claim\n\nThe zephyrcache entries expire after five minutes.\n\n## Related\n\nDisputed by [forever](cache-forever.md#claim).',
  }),
  'concepts/cache-forever.md': page({ title: 'Entries are kept forever', body: '## Claim\n\nEntries are kept until restart.' }),
  'sources/ttl-benchmark.md': page({
    type: 'source',
    title: 'TTL measurement',
    extra: rel(['concepts/cache-ttl', 'supports']),
    body: 'Measured expiry of entries at 300 seconds. See [[concepts/cache-ttl]].',
  }),
  'concepts/v1.md': page({ title: 'Quorvex protocol v1', body: 'The quorvex handshake uses two round trips.' }),
  'concepts/v2.md': page({ title: 'Protocol v2', extra: rel(['concepts/v1', 'supersedes']), body: 'Replaces [[v1]]: one round trip.' }),
  'concepts/v3.md': page({ title: 'Protocol v3', extra: rel(['concepts/v2', 'supersedes']), body: 'Replaces [[v2]]: zero round trips.' }),
}

describe('recallMemory bundles', () => {
  test('a contradiction and direct evidence join the card through typed relations only', async () => {
    const { v } = await indexed('vault', claims)
    const r = await memory(v.paths, 'zephyrcache expire')
    assert.equal(r.mode, 'lexical')
    const [top] = r.bundles
    assert.equal(top.card.pageId, 'concepts/cache-ttl')
    assert.equal(top.card.relation, 'card')
    assert.match(top.card.excerpt, /zephyrcache entries expire/)
    assert.equal(top.card.heading, 'Claim')
    assert.ok(top.card.lineStart >= 1 && top.card.lineEnd >= top.card.lineStart)
    const conflict = top.conflicts.find((c) => c.pageId === 'concepts/cache-forever')
    assert.ok(conflict, JSON.stringify(top))
    assert.equal(conflict.relation, 'contradicts')
    assert.equal(conflict.relationDirection, 'outgoing')
    assert.ok(conflict.qmdRank == null, 'admitted by the relation, not retrieved')
    assert.ok(conflict.matchReasons.includes('relation:contradicts'))
    const ev = top.evidence.map((e) => [e.pageId, e.relation])
    assert.deepEqual(ev, [['sources/ttl-benchmark', 'supports']])
    assert.ok(r.context.includes('Competing claim:') && r.context.length <= 8000)
    // Every page appears once across bundles.
    const ids = r.bundles.flatMap((b) => [b.card, ...b.evidence, ...b.conflicts].filter(Boolean).map((i) => i.pageId))
    assert.equal(new Set(ids).size, ids.length)
    // The ablation: without typed-link assembly the unretrieved claim is absent.
    const plain = await memory(v.paths, 'zephyrcache expire', { typedExpansion: false })
    assert.ok(!plain.bundles.some((b) => b.conflicts.length > 0))
  })

  test('supersession chains follow one hop and label the historical claim', async () => {
    const { v } = await indexed('vault', claims)
    const r = await memory(v.paths, 'quorvex handshake')
    const [top] = r.bundles
    assert.equal(top.card.pageId, 'concepts/v1')
    assert.ok(top.card.warnings.some((w) => w.includes('superseded by concepts/v2')), JSON.stringify(top.card))
    assert.deepEqual(top.conflicts.map((c) => [c.pageId, c.relation, c.relationDirection]), [['concepts/v2', 'supersedes', 'incoming']])
    assert.ok(!r.bundles.some((b) => [b.card, ...b.conflicts].some((i) => i && i.pageId === 'concepts/v3')), 'one hop only')
  })

  test('budget edges: lower bundles go first, a tiny budget falls back to links', async () => {
    const pages = {}
    for (let i = 0; i < 6; i++) {
      pages[`concepts/p${i}.md`] = page({ type: ['concept', 'entity', 'skill', 'case', 'analysis', 'synthesis'][i], title: `Plinth ${i}`, body: `## Claim\n\nplinthword ${'detail '.repeat(150)}` })
    }
    const { v } = await indexed('vault', pages)
    const full = await memory(v.paths, 'plinthword', { policy: { ...EXPLICIT, maxResults: 5 } })
    assert.equal(full.bundles.length, 5)
    assert.ok(full.context.length <= 8000)
    for (const b of full.bundles) assert.ok(b.card.excerpt.length <= 800)
    const small = await memory(v.paths, 'plinthword', { budgetChars: 2000 })
    assert.ok(small.bundles.length >= 1 && small.bundles.length < full.bundles.length)
    assert.ok(small.context.length <= 2000)
    assert.equal(small.bundles[0].card.pageId, full.bundles[0].card.pageId)
    const tiny = await memory(v.paths, 'plinthword', { budgetChars: 5 })
    assert.equal(tiny.bundles.length, 0)
    assert.ok(tiny.diagnostics.some((d) => d.code === 'memory_budget_too_small'))
    // Automatic policy: at most 3 bundles.
    const auto = await recallMemory(v.paths, 'plinthword', { policy: AUTOMATIC, mode: 'lexical' })
    assert.ok(auto.bundles.length <= 3)
  })

  test('every item carries date, status, freshness and scope when the page declares them', async () => {
    const { v } = await indexed('vault', {
      'concepts/retention-old.md': page({
        title: 'Logs are kept thirty days',
        status: 'stable',
        extra: 'created: 2025-01-10\nupdated: 2025-02-01\nscope: EU tenants\nstale_after: 2000-01-01\nverified:\n  - by: Ada\n    at: 2025-02-02',
        body: '## Claim\n\nThe glimmerlog retention keeps logs thirty days.',
      }),
      'concepts/retention-new.md': page({
        title: 'Logs are kept ninety days',
        status: 'draft',
        extra: `created: 2026-05-01\n${rel(['concepts/retention-old', 'contradicts'])}`,
        body: 'Ninety days now; disputes [old](retention-old.md).',
      }),
      'concepts/bare.md': page({ title: 'Bare glimmerlog note', body: 'glimmerlog without metadata.' }),
    })
    const r = await memory(v.paths, 'glimmerlog retention thirty days')
    const items = r.bundles.flatMap((b) => [b.card, ...b.evidence, ...b.conflicts].filter(Boolean))
    const by = Object.fromEntries(items.map((i) => [i.pageId, i]))
    const old = by['concepts/retention-old']
    assert.ok(old, JSON.stringify(r.bundles))
    assert.equal(old.date, '2025-02-01', 'updated wins over created')
    assert.equal(old.status, 'stable')
    assert.equal(old.scope, 'EU tenants')
    assert.deepEqual(old.freshness, { staleAfter: '2000-01-01', verifiedAt: '2025-02-02', stale: true, verified: true })
    assert.ok(old.warnings.some((w) => w.startsWith('stale: past stale_after 2000-01-01')), JSON.stringify(old.warnings))
    const nw = by['concepts/retention-new']
    assert.ok(nw, 'the contradicting claim is in the bundles')
    assert.equal(nw.date, '2026-05-01')
    assert.equal(nw.status, 'draft')
    assert.equal(nw.freshness, undefined)
    assert.ok(nw.warnings.includes('draft: not reviewed'))
    // Both claims in one bundle, each with its date in the rendered context.
    assert.ok(r.bundles.some((b) => [b.card, ...b.conflicts].filter(Boolean).map((i) => i.pageId).sort().join() === 'concepts/retention-new,concepts/retention-old'))
    assert.match(r.context, /date: 2025-02-01/)
    assert.match(r.context, /date: 2026-05-01/)
    assert.match(r.context, /scope: EU tenants/)
    const other = await memory(v.paths, 'bare glimmerlog note without metadata')
    const bare = other.bundles.map((b) => b.card).find((c) => c && c.pageId === 'concepts/bare')
    assert.ok(bare, JSON.stringify(other.bundles))
    for (const k of ['date', 'freshness', 'scope']) assert.equal(bare[k], undefined, k)
  })

  test('competing claims stay in one bundle whichever side the query names', async () => {
    // A conflict dev set: the audit supports one card and contradicts another card; a
    // superseded note only the query's other side reaches.
    const { v } = await indexed('vault', {
      'concepts/rollout-tuesday.md': page({ title: 'Rollouts happen on Tuesday', body: '## Claim\n\nThe vantorix rollout runs every Tuesday.' }),
      'concepts/rollout-daily.md': page({ type: 'entity', title: 'Rollouts run daily', body: '## Claim\n\nThe vantorix rollout runs daily at noon.' }),
      'sources/rollout-audit.md': page({
        type: 'source',
        title: 'Rollout audit',
        extra: rel(['concepts/rollout-tuesday', 'supports'], ['concepts/rollout-daily', 'contradicts']),
        body: 'Audit of vantorix rollout logs: only Tuesdays ([[concepts/rollout-tuesday]]), never daily ([daily](../concepts/rollout-daily.md)).',
      }),
      'concepts/rollout-checklist.md': page({ type: 'skill', title: 'Rollout checklist', body: 'Steps of a vantorix rollout.' }),
      'concepts/rollout-owner.md': page({ type: 'case', title: 'Rollout owner', body: 'Who owns the vantorix rollout.' }),
      'sources/rollout-note-old.md': page({ type: 'source', title: 'Old rollout note', body: 'Rollouts were monthly in the old quintal process.' }),
      'sources/rollout-note-new.md': page({
        type: 'source',
        title: 'New rollout note',
        extra: rel(['sources/rollout-note-old', 'supersedes']),
        body: 'Replaces [the old note](rollout-note-old.md): weekly now.',
      }),
    })
    const together = (r, a, b) => r.bundles.some((x) => {
      const ids = [x.card, ...x.evidence, ...x.conflicts].filter(Boolean).map((i) => i.pageId)
      return ids.includes(a) && ids.includes(b)
    })
    const r = await memory(v.paths, 'vantorix rollout every Tuesday')
    assert.ok(together(r, 'sources/rollout-audit', 'concepts/rollout-daily'), JSON.stringify(r.bundles, null, 1))
    const daily = r.bundles.flatMap((b) => b.conflicts).find((i) => i.pageId === 'concepts/rollout-daily')
    assert.equal(daily.relation, 'contradicts')
    assert.equal(daily.relatedTo, 'sources/rollout-audit')
    assert.match(r.context, /contradicts ← sources\/rollout-audit/)
    const ids = r.bundles.flatMap((b) => [b.card, ...b.evidence, ...b.conflicts].filter(Boolean).map((i) => i.pageId))
    assert.equal(new Set(ids).size, ids.length)
    // The audit is the card's evidence; its own competing claim is admitted next to it.
    assert.equal(r.bundles[0].card.pageId, 'concepts/rollout-tuesday')
    assert.equal(r.bundles[0].evidence[0].pageId, 'sources/rollout-audit')
    // Without typed-link assembly the two sides are apart.
    const plain = await memory(v.paths, 'vantorix rollout every Tuesday', { typedExpansion: false })
    assert.ok(!together(plain, 'sources/rollout-audit', 'concepts/rollout-daily'))
    // A query naming only the superseded side: the superseding note joins it.
    const old = await memory(v.paths, 'quintal monthly')
    assert.ok(together(old, 'sources/rollout-note-old', 'sources/rollout-note-new'), JSON.stringify(old.bundles))
  })

  test('retrieved evidence brings the card it supports instead of standing unpromoted', async () => {
    const { v } = await indexed('vault', claims)
    // Only the source matches these words; the card it `supports` is admitted as the card.
    const r = await memory(v.paths, 'measured 300 seconds')
    const [top] = r.bundles
    assert.equal(top.card.pageId, 'concepts/cache-ttl', JSON.stringify(r.bundles))
    assert.equal(top.card.qmdRank, undefined)
    assert.ok(top.card.matchReasons.includes('relation:supports'), top.card.matchReasons.join())
    assert.ok(top.card.matchReasons.includes('via:sources/ttl-benchmark'), top.card.matchReasons.join())
    assert.equal(top.evidence[0].pageId, 'sources/ttl-benchmark')
    assert.equal(top.evidence[0].relation, 'supports')
    // The card's own competing claim comes with it, and nothing is labelled unpromoted.
    assert.ok(top.conflicts.some((c) => c.pageId === 'concepts/cache-forever'))
    assert.doesNotMatch(r.context, /Unpromoted evidence/)
    // Without typed-link assembly the source stands alone, unpromoted.
    const plain = await memory(v.paths, 'measured 300 seconds', { typedExpansion: false })
    assert.equal(plain.bundles[0].card, undefined)
    assert.equal(plain.bundles[0].evidence[0].relation, 'unpromoted')
  })

  test('no card: unpromoted evidence, labelled; nothing found is a valid answer', async () => {
    const { v } = await indexed('vault', {
      'sources/obs.md': page({ type: 'source', title: 'Observation', body: 'The vexillum flag was seen twice.' }),
    })
    const r = await memory(v.paths, 'vexillum')
    assert.equal(r.bundles.length, 1)
    assert.equal(r.bundles[0].card, undefined)
    assert.equal(r.bundles[0].evidence[0].relation, 'unpromoted')
    assert.match(r.context, /Unpromoted evidence/)
    const none = await memory(v.paths, 'nothingmatchesthis')
    assert.deepEqual(none.bundles, [])
    const empty = await memory(v.paths, '   ')
    assert.equal(empty.diagnostics[0].code, 'recall_query_empty')
    await assert.rejects(memory(v.paths, 'x', { mode: 'nope' }), (e) => e.code === 'invalid_argument')
  })
})

describe('typed relations: lint', () => {
  test('every rule reports its code in reindex warnings and status issues, and invalid relations are inert', async () => {
    const { v, r } = await indexed('vault', {
      'concepts/a.md': page({
        title: 'Alpha',
        extra: rel(
          ['concepts/b', 'supports'],
          ['concepts/b', 'supports'],
          ['concepts/a', 'qualifies'],
          ['concepts/missing', 'contradicts'],
          ['concepts/b', 'applies_under'],
          ['concepts/b', 'refutes'],
          ['concepts/c', 'contradicts'],
          ['concepts/b#claim', 'supports'],
        ),
        body: 'gammaword alpha links [[concepts/b]] only.',
      }),
      'concepts/b.md': page({ title: 'Beta', body: 'beta' }),
      'concepts/c.md': page({ title: 'Gamma', body: 'no link back' }),
    })
    const codes = new Set(r.warnings.filter((w) => w.path === 'concepts/a.md').map((w) => w.code))
    for (const c of ['relation_duplicate', 'relation_self_link', 'relation_missing_target', 'relation_invalid_scope', 'relation_unknown_type', 'relation_missing_body_link', 'relation_invalid_target']) {
      assert.ok(codes.has(c), `${c} in ${[...codes]}`)
    }
    const st = await readIndexStatus(v.paths)
    assert.equal(st.state, 'ready', 'lint never makes the index stale')
    assert.ok(st.issues.some((i) => i.code === 'relation_missing_body_link'))
    // c is contradicted without a body link: it is not admitted.
    const m = await memory(v.paths, 'gammaword')
    assert.ok(!m.bundles.some((b) => b.conflicts.some((c) => c.pageId === 'concepts/c')))
  })

  test('a relation into the other vault is a missing target, never followed', async () => {
    const personal = makeVault(path.join(base, 'personal'), { pages: { 'concepts/p.md': page({ title: 'P', body: 'p' }) } })
    await reindexOne(personal.paths)
    process.env.WIKI_HOME = personal.paths.root
    const { r } = await indexed('project', {
      'concepts/x.md': page({ title: 'X', extra: rel(['concepts/p', 'contradicts']), body: 'xylo [[concepts/p]]' }),
    })
    assert.ok(r.warnings.some((w) => w.code === 'relation_missing_target'))
    const m = await recallMemory({ root: path.join(base, 'project') }, 'xylo', { policy: EXPLICIT, mode: 'lexical' })
    assert.ok(!m.bundles.some((b) => b.conflicts.length > 0), 'never followed into the personal vault')
    noPersonalVault(base)
  })
})

describe('link graph: neighbours and linkPath', () => {
  test('zoom-out lists typed edges with anchors; paths walk links both ways; the graph updates incrementally', async () => {
    const { v } = await indexed('vault', claims)
    const n = await neighbours(v.paths, 'concepts/cache-ttl', { depth: 1 })
    assert.equal(n.page.id, 'concepts/cache-ttl')
    assert.match(n.content, /zephyrcache/)
    const out = n.outbound.find((e) => e.to === 'concepts/cache-forever')
    assert.deepEqual(out.anchors, ['claim'])
    assert.equal(out.kind, 'markdown')
    assert.deepEqual(out.relations, [{ type: 'contradicts' }])
    const inbound = n.inbound.find((e) => e.from === 'sources/ttl-benchmark')
    assert.deepEqual(inbound.relations.map((x) => x.type), ['supports'])
    const outOnly = await neighbours(v.paths, 'concepts/cache-ttl', { direction: 'outbound' })
    assert.equal(outOnly.inbound.length, 0)
    const p = await linkPath(v.paths, 'concepts/v3', 'concepts/v1')
    assert.equal(p.found, true)
    assert.deepEqual(p.pages.map((x) => x.id), ['concepts/v3', 'concepts/v2', 'concepts/v1'])
    const back = await linkPath(v.paths, 'concepts/v1', 'concepts/v3')
    assert.ok(back.found && back.hops.every((h) => h.reversed))
    const none = await linkPath(v.paths, 'concepts/v1', 'concepts/cache-ttl', { maxHops: 8 })
    assert.equal(none.found, false)
    assert.equal(none.diagnostics[0].code, 'path_not_found')
    const missing = await neighbours(v.paths, 'concepts/nope')
    assert.equal(missing.diagnostics[0].code, 'page_not_found')
    await assert.rejects(neighbours(v.paths, 'x', { direction: 'sideways' }), (e) => e.code === 'invalid_argument')
    // Incremental: a new link appears after an ordinary (non-rebuild) reindex.
    editPage(v, 'concepts/v1.md', page({ title: 'Quorvex protocol v1', body: 'The quorvex handshake; see [[cache-ttl]].' }))
    const r = await reindexOne(v.paths)
    assert.equal(r.fullRebuild, false)
    const now = await linkPath(v.paths, 'concepts/v1', 'concepts/cache-ttl')
    assert.equal(now.found, true)
    assert.equal(now.hops.length, 1)
    // An index that does not exist is a diagnostic, not a rejection.
    const unindexed = makeVault(path.join(base, 'unindexed'))
    const nowhere = await neighbours(unindexed.paths, 'a')
    assert.ok(nowhere.diagnostics.length === 1)
  })

  test('hostile graphs: cycles, self links, dangling targets, 10,000 links stay bounded', async () => {
    const many = Array.from({ length: 10000 }, (_, i) => `[[hub/p${i}]]`).join(' ')
    const { v, r } = await indexed('vault', {
      'hub/index-of-all.md': page({ title: 'Hub', body: `hubword ${many} [[hub/a]]` }),
      'hub/a.md': page({ title: 'A', extra: rel(['hub/b', 'supersedes']), body: 'cyclo [[hub/b]] [[hub/a]] [self](a.md)' }),
      'hub/b.md': page({ title: 'B', extra: rel(['hub/a', 'supersedes']), body: 'cyclo [[hub/a]]' }),
    })
    assert.ok(r.warnings.some((w) => w.code === 'page_links_truncated'))
    const n = await neighbours(v.paths, 'hub/index-of-all', { maxBytes: 4096 })
    assert.equal(n.truncated, true)
    assert.ok(n.dangling.length > 0 && n.dangling.length <= 1000)
    const m = await memory(v.paths, 'cyclo')
    const ids = m.bundles.flatMap((b) => [b.card, ...b.evidence, ...b.conflicts].filter(Boolean).map((i) => i.pageId))
    assert.equal(new Set(ids).size, ids.length)
    assert.ok(m.bundles.length >= 1)
    const self = await neighbours(v.paths, 'hub/a', { depth: 3 })
    assert.ok(!self.outbound.some((e) => e.from === e.to), 'a link to itself is no edge')
    assert.ok(self.outbound.some((e) => e.from === 'hub/a' && e.to === 'hub/b'))
  })

  test('CLI: memory, neighbours and path', async () => {
    const { v } = await indexed('vault', claims)
    const mem = await runCli(['memory', v.paths.root, 'zephyrcache expire', '--mode', 'lexical'])
    assert.equal(mem.code, 0, mem.stderr)
    assert.match(mem.stdout, /Competing claim: Entries are kept forever/)
    const nb = await runCli(['neighbours', v.paths.root, 'concepts/cache-ttl'])
    assert.equal(JSON.parse(nb.stdout).page.id, 'concepts/cache-ttl')
    const p = await runCli(['path', v.paths.root, 'concepts/v3', 'concepts/v1'])
    assert.equal(JSON.parse(p.stdout).found, true)
  })
})
