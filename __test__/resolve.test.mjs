// resolveConflict (the spec's wiki_resolve_conflict) end to end: every validation code, the
// resolution page on disk, idempotent repeats and the replacement chain, recall honouring the
// active decision (historical claims, scope, unresolved pairs, cites_superseded), and the faults —
// concurrent processes on one pair, a busy events lock, a busy index writer (stale derived state),
// a kill between the temporary file and the rename.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { afterEach, beforeEach, describe, test } from 'node:test'

import {
  EXPLICIT,
  NEEDS_HOOKS,
  addon,
  eventsLockHolder,
  eventsLockReleased,
  makeTmp,
  makeVault,
  noPersonalVault,
  page,
  reindexOne,
  repoRoot,
  rmDir,
  runCli,
  runNodeScript,
  setWikiHome,
  spawnPausedCli,
} from './helpers.mjs'

const { resolveConflict, recallMemory, recallWiki, readIndexStatus } = addon
addon.configure({ dense: false })

let base
beforeEach(() => {
  base = makeTmp()
  noPersonalVault(base)
})
afterEach(() => rmDir(base))

const rel = (target, type) => `relations:\n  - target: ${target}\n    type: ${type}`

const claims = {
  'concepts/deploy-friday.md': page({
    title: 'Deploys may run on Fridays',
    status: 'stable',
    extra: rel('concepts/deploy-freeze', 'contradicts'),
    body: '## Claim\n\nThe glimmerpipe deploys may run on Fridays.\n\nDisputed by [freeze](deploy-freeze.md).',
  }),
  'concepts/deploy-freeze.md': page({ title: 'Friday deploy freeze', status: 'stable', body: '## Claim\n\nNo glimmerpipe deploys on Fridays.' }),
  'concepts/runbook.md': page({ title: 'Release runbook', body: 'Follow the [freeze rule](deploy-freeze.md) for the quillbranch release.' }),
  'concepts/cache-a.md': page({ title: 'Cache A', body: 'The vortmesh cache keeps entries for one hour.' }),
  'concepts/cache-b.md': page({ title: 'Cache B', body: 'The vortmesh cache keeps entries for one day.' }),
}

async function indexed(pages = claims) {
  const v = makeVault(path.join(base, 'vault'), { pages })
  const r = await reindexOne(v.paths)
  assert.equal(r.ok, true, JSON.stringify(r.errors))
  return v
}

const args = (o = {}) => ({
  vault: 'project',
  selectedPageId: 'concepts/deploy-freeze',
  otherPageId: 'concepts/deploy-friday',
  relation: 'supersedes',
  ...o,
})

const analyses = (v) => {
  const dir = path.join(v.wiki, 'analyses')
  return fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []
}

const memory = (paths, q) => recallMemory(paths, q, { policy: EXPLICIT, mode: 'lexical' })

describe('resolveConflict', () => {
  test('every invalid request rejects with its code and writes nothing', async () => {
    const v = await indexed()
    const home = path.join(base, 'home2')
    makeVault(path.join(home), { pages: { 'concepts/mine.md': page({ title: 'Mine', body: 'x' }) } })
    const cases = [
      [args({ relation: 'refutes' }), 'resolution_relation_invalid'],
      [args({ selectedPageId: 'concepts/deploy-freeze#claim' }), 'resolution_page_id_invalid'],
      [args({ otherPageId: 'Concepts/Deploy-Freeze' }), 'resolution_same_page'],
      [args({ otherPageId: 'concepts/nope' }), 'resolution_page_missing'],
      [args({ relation: 'applies_under' }), 'resolution_scope_invalid'],
      [args({ scope: 'weekends' }), 'resolution_scope_invalid'],
      [args({ rationale: 'x'.repeat(20_001) }), 'resolution_rationale_too_long'],
      [args({ replaces: 'resolution-0123' }), 'resolution_replaces_invalid'],
      [args({ vault: 'team' }), 'invalid_argument'],
      [args({ vault: 'personal' }), 'resolution_vault_unavailable'],
    ]
    for (const [a, code] of cases) {
      await assert.rejects(resolveConflict(v.paths, a), (e) => e.code === code || assert.fail(`${JSON.stringify(a)}: ${e.code} ${e.message}`))
    }
    // A page of the personal vault paired with a project page: cross-vault.
    setWikiHome(home)
    await assert.rejects(resolveConflict(v.paths, args({ otherPageId: 'concepts/mine' })), { code: 'resolution_cross_vault' })
    assert.deepEqual(analyses(v), [])
    assert.ok(eventsLockReleased(v.dotWiki))
  })

  test('one immutable page with the spec frontmatter; a repeat is a no-op', async () => {
    const v = await indexed()
    const r = await resolveConflict(v.paths, args({ rationale: 'The freeze was reinstated in June.' }))
    assert.equal(r.created, true)
    assert.match(r.resolution.id, /^resolution-[0-9a-f]{32}$/)
    assert.equal(r.resolution.pageId, `analyses/${r.resolution.id}`)
    assert.equal(r.resolution.status, 'active')
    assert.equal(r.resolution.decidedBy, 'user')
    assert.equal(r.resolution.scope, undefined)
    assert.equal(r.index.updated, true, JSON.stringify(r.index))
    assert.equal(r.index.stale, false)
    assert.deepEqual(r.warnings, [])
    assert.deepEqual(analyses(v), [`${r.resolution.id}.md`])
    // The spec's conflict_selected event, appended in the same lock hold as the page.
    const events = () =>
      fs.readFileSync(path.join(v.dotWiki, 'meta', 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l))
    const [ev] = events()
    assert.equal(events().length, 1)
    assert.equal(ev.kind, 'recall_feedback')
    assert.equal(ev.action, 'conflict_selected')
    assert.equal(ev.page_id, 'concepts/deploy-freeze')
    assert.equal(ev.visibility, 'internal')
    assert.equal(r.path, path.join(v.wiki, 'analyses', `${r.resolution.id}.md`))
    const text = fs.readFileSync(r.path, 'utf8')
    for (const line of [
      'type: analysis',
      'category: conflict-resolution',
      'status: stable',
      'resolution:',
      `  id: "${r.resolution.id}"`,
      '  selected: "concepts/deploy-freeze"',
      '  other: "concepts/deploy-friday"',
      '  relation: supersedes',
      '  scope: null',
      '  decided_by: user',
      `  decided_at: "${r.resolution.decidedAt}"`,
      '  replaces: null',
    ]) {
      assert.ok(text.split('\n').includes(line), `${line}\n${text}`)
    }
    assert.match(text, /\[Friday deploy freeze\]\(\.\.\/concepts\/deploy-freeze\.md\)/)
    assert.match(text, /The freeze was reinstated in June\./)
    const again = await resolveConflict(v.paths, args({ rationale: 'said again' }))
    assert.equal(again.created, false)
    assert.deepEqual(again.resolution, r.resolution)
    assert.equal(fs.readFileSync(r.path, 'utf8'), text)
    assert.deepEqual(analyses(v), [`${r.resolution.id}.md`])
    assert.equal(events().length, 1, 'a repeat appends no event')
  })

  test('recall shows the other claim as historical, the declared contradiction for audit, and cites_superseded', async () => {
    const v = await indexed()
    const before = await memory(v.paths, 'glimmerpipe deploys Fridays')
    const b0 = before.bundles[0]
    assert.equal(b0.resolution, undefined)
    assert.deepEqual(b0.unresolved.map((u) => u.pageIds.slice().sort()), [['concepts/deploy-freeze', 'concepts/deploy-friday']])
    assert.match(before.context, /These claims compete; ask the user which applies: concepts\/deploy-(friday|freeze) vs concepts\/deploy-(freeze|friday)\./)
    const { resolution } = await resolveConflict(v.paths, args())
    const r = await memory(v.paths, 'glimmerpipe deploys Fridays')
    const items = r.bundles.flatMap((b) => [b.card, ...b.evidence, ...b.conflicts].filter(Boolean))
    assert.ok(!items.some((i) => i.pageId === resolution.pageId), 'the record is not a card of its own')
    const friday = items.find((i) => i.pageId === 'concepts/deploy-friday')
    const freeze = items.find((i) => i.pageId === 'concepts/deploy-freeze')
    assert.equal(friday.historical, true)
    assert.equal(friday.status, 'stable', 'status untouched')
    assert.ok(friday.warnings.includes(`superseded by concepts/deploy-freeze (user resolution ${resolution.id})`), JSON.stringify(friday))
    assert.equal(freeze.historical, false)
    const bundle = r.bundles.find((b) => b.resolution)
    assert.equal(bundle.resolution.id, resolution.id)
    assert.deepEqual(bundle.unresolved, [])
    const partner = bundle.conflicts[0]
    assert.ok(partner.matchReasons.some((m) => m.startsWith('declared:contradicts')), JSON.stringify(partner))
    assert.match(r.context, /Resolved by the user \(resolution-/)
    // recallWiki: codes on the historical page and on the page that cites it.
    const wiki = await recallWiki(v.paths, 'glimmerpipe deploys Fridays', { policy: EXPLICIT, mode: 'lexical' })
    assert.ok(wiki.results.find((x) => x.id === 'concepts/deploy-friday').warnings.includes('superseded'))
    const runbook = await recallWiki(v.paths, 'quillbranch release', { policy: EXPLICIT, mode: 'lexical' })
    assert.equal(runbook.results[0].id, 'concepts/runbook')
    assert.deepEqual(runbook.results[0].warnings, [])
    // The runbook cites the freeze, which is current: nothing. Supersede the freeze instead.
    const flip = await resolveConflict(v.paths, args({ selectedPageId: 'concepts/deploy-friday', otherPageId: 'concepts/deploy-freeze', replaces: resolution.id }))
    assert.equal(flip.created, true)
    assert.equal(flip.resolution.replaces, resolution.id)
    const cites = await recallWiki(v.paths, 'quillbranch release', { policy: EXPLICIT, mode: 'lexical' })
    assert.deepEqual(cites.results[0].warnings, ['cites_superseded'])
    const status = await readIndexStatus(v.paths)
    const issue = status.issues.find((i) => i.code === 'cites_superseded')
    assert.equal(issue.path, 'concepts/runbook.md')
    assert.match(issue.message, /concepts\/deploy-freeze, which is superseded by concepts\/deploy-friday/)
    const m = await memory(v.paths, 'quillbranch release')
    assert.ok(m.bundles[0].card.warnings.some((w) => w.startsWith('cites_superseded: cites concepts/deploy-freeze')))
  })

  test('qualifies and applies_under keep both claims current; a changed choice needs replaces', async () => {
    const v = await indexed()
    const q = await resolveConflict(v.paths, args({ selectedPageId: 'concepts/cache-a', otherPageId: 'concepts/cache-b', relation: 'qualifies' }))
    await assert.rejects(
      resolveConflict(v.paths, args({ selectedPageId: 'concepts/cache-a', otherPageId: 'concepts/cache-b', relation: 'applies_under', scope: 'offline mode' })),
      { code: 'resolution_replaces_required' },
    )
    const a = await resolveConflict(
      v.paths,
      args({ selectedPageId: 'concepts/cache-a', otherPageId: 'concepts/cache-b', relation: 'applies_under', scope: '  Offline   mode ', replaces: q.resolution.id }),
    )
    assert.equal(a.resolution.scope, 'Offline mode')
    const r = await memory(v.paths, 'vortmesh cache entries')
    const b = r.bundles.find((x) => x.resolution)
    assert.equal(b.resolution.id, a.resolution.id)
    assert.equal(b.resolution.relation, 'applies_under')
    const items = [b.card, ...b.conflicts]
    assert.ok(items.every((i) => !i.historical))
    assert.equal(items.find((i) => i.pageId === 'concepts/cache-a').scope, 'Offline mode')
    // The replaced record stays on disk (immutable); a stale replaces is refused.
    assert.equal(analyses(v).length, 2)
    await assert.rejects(
      resolveConflict(v.paths, args({ selectedPageId: 'concepts/cache-b', otherPageId: 'concepts/cache-a', relation: 'qualifies', replaces: q.resolution.id })),
      { code: 'resolution_replaces_invalid' },
    )
  })

  test('concurrent processes on one pair write one page', async () => {
    const v = await indexed()
    const script = (sel, oth) => `
      const addon = require(${JSON.stringify(path.join(repoRoot, 'index.js'))})
      addon.resolveConflict(${JSON.stringify(v.paths)}, { vault: 'project', selectedPageId: ${JSON.stringify(sel)}, otherPageId: ${JSON.stringify(oth)}, relation: 'supersedes', updateIndex: false })
        .then((r) => console.log(JSON.stringify({ id: r.resolution.id, created: r.created })), (e) => console.log(JSON.stringify({ code: e.code })))`
    const runs = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        runNodeScript(i % 2 ? script('concepts/deploy-friday', 'concepts/deploy-freeze') : script('concepts/deploy-freeze', 'concepts/deploy-friday')),
      ),
    )
    const out = runs.map((x) => JSON.parse(x.stdout.trim().split('\n').pop()))
    const created = out.filter((o) => o.created)
    assert.equal(created.length, 1, JSON.stringify(out))
    for (const o of out) {
      if (o.code) assert.equal(o.code, 'resolution_replaces_required', JSON.stringify(out))
      else assert.equal(o.id, created[0].id)
    }
    assert.deepEqual(analyses(v), [`${created[0].id}.md`])
  })

  // The holder is a CLI paused while it holds the lock (`LLM_WIKI_PAUSE_AT`): test-hooks builds.
  test('a busy events lock aborts without a page', { skip: NEEDS_HOOKS }, async () => {
    const v = await indexed()
    const lock = path.join(v.dotWiki, 'meta', 'events.lock')
    const holder = await eventsLockHolder(v.root)
    try {
      const started = Date.now()
      await assert.rejects(resolveConflict(v.paths, args()), { code: 'events_lock_busy' })
      assert.ok(Date.now() - started >= 1900)
      assert.deepEqual(analyses(v), [])
      assert.equal(JSON.parse(fs.readFileSync(lock, 'utf8')).pid, holder.pid, "another writer's lock is left alone")
    } finally {
      assert.equal((await holder.resume()).code, 0)
    }
    assert.equal((await resolveConflict(v.paths, args())).created, true)
  })

  test('the CLI records and repeats a decision', async () => {
    const v = await indexed()
    const r = await runCli(['resolve', v.root, 'concepts/deploy-freeze', 'concepts/deploy-friday', '--relation', 'supersedes', '--json'])
    assert.equal(r.code, 0, r.stderr)
    const first = JSON.parse(r.stdout)
    assert.equal(first.created, true)
    const again = await runCli(['resolve', v.root, 'concepts/deploy-freeze', 'concepts/deploy-friday', '--relation', 'supersedes'])
    assert.match(again.stdout, new RegExp(`already recorded ${first.resolution.id}`))
    const bad = await runCli(['resolve', v.root, 'concepts/deploy-freeze', 'concepts/deploy-freeze', '--relation', 'supersedes'])
    assert.equal(bad.code, 1)
    assert.match(bad.stderr, /error \[resolution_same_page\]/)
  })
})

const hookDescribe = NEEDS_HOOKS ? describe.skip : describe

hookDescribe('resolveConflict faults (test hooks)', () => {
  test('a busy index writer leaves the committed page and reports stale derived state', async () => {
    const v = await indexed()
    const holder = await spawnPausedCli(['index', v.root, '--component', 'lexical'], 'locked', { env: { WIKI_HOME: process.env.WIKI_HOME } })
    try {
      const r = await resolveConflict(v.paths, args())
      assert.equal(r.created, true)
      assert.equal(r.index.updated, false)
      assert.equal(r.index.stale, true)
      assert.deepEqual(r.index.issues.map((i) => i.code), ['qmd_index_busy', 'resolution_index_stale'])
      assert.ok(fs.existsSync(r.path))
    } finally {
      await holder.resume()
    }
    // The next reindex picks the page up and recall follows it.
    assert.equal((await reindexOne(v.paths)).ok, true)
    const m = await memory(v.paths, 'glimmerpipe deploys Fridays')
    assert.ok(m.bundles.some((b) => b.resolution))
  })

  test('a kill between the page rename and the event append: the page stands, rebuildFeedback replays the event once', async () => {
    const v = await indexed()
    const killed = await runCli(['resolve', v.root, 'concepts/deploy-freeze', 'concepts/deploy-friday', '--relation', 'supersedes', '--no-index'], {
      env: { LLM_WIKI_CRASH_AT: 'feedback_append' },
    })
    assert.equal(killed.signal ?? 'SIGKILL', 'SIGKILL', killed.stderr)
    const records = analyses(v).filter((f) => f.endsWith('.md') && !f.startsWith('.'))
    assert.equal(records.length, 1, 'the page is committed before the append')
    const id = records[0].replace(/\.md$/, '')
    const stream = path.join(v.dotWiki, 'meta', 'events.jsonl')
    assert.ok(!fs.existsSync(stream) || !fs.readFileSync(stream, 'utf8').includes('conflict_selected'))
    const { rebuildFeedback } = addon
    for (let i = 0; i < 2; i++) {
      const rb = await rebuildFeedback(v.paths)
      assert.equal(rb.enabled, true)
      assert.deepEqual(rb.replayed, [id], 'replayed once per rebuild, never accumulated')
    }
    const projection = JSON.parse(fs.readFileSync(path.join(v.dotWiki, 'meta', 'recall-feedback.json'), 'utf8'))
    assert.deepEqual(projection.replayed, [id])
    assert.equal(Object.keys(projection.global).length, 1, JSON.stringify(projection.global))
    // The killed writer's OS lock went with it (its record stays in the file); a repeat of the
    // decision is a no-op that appends nothing, and the rebuild still replays the record once.
    assert.ok(!eventsLockReleased(v.dotWiki), 'the killed writer left its record')
    const again = await resolveConflict(v.paths, args({ updateIndex: false }))
    assert.equal(again.created, false)
    assert.deepEqual((await rebuildFeedback(v.paths)).replayed, [id])
  })

  test('a kill between the temporary file and the rename leaves no record; the lock is free at once', async () => {
    const v = await indexed()
    const killed = await runCli(['resolve', v.root, 'concepts/deploy-freeze', 'concepts/deploy-friday', '--relation', 'supersedes'], {
      env: { LLM_WIKI_CRASH_AT: 'resolve:before-rename' },
    })
    assert.equal(killed.signal ?? 'SIGKILL', 'SIGKILL', killed.stderr)
    assert.ok(!analyses(v).some((f) => f.endsWith('.md') && !f.startsWith('.')), analyses(v).join())
    // The dead writer's record stays in the lock file, but its OS lock died with it: no
    // stale-age wait, no pid check (issue 43 item 5).
    const lock = path.join(v.dotWiki, 'meta', 'events.lock')
    const owner = JSON.parse(fs.readFileSync(lock, 'utf8'))
    assert.equal(typeof owner.writerId, 'string', JSON.stringify(owner))
    const started = Date.now()
    const r = await resolveConflict(v.paths, args())
    assert.ok(Date.now() - started < 1900, 'the lock was free at once')
    assert.equal(r.created, true)
    // The leftover temporary file is no page: the index holds exactly the claims and the record.
    assert.equal(r.index.updated, true)
    const st = await readIndexStatus(v.paths)
    assert.equal(st.totalDocuments, Object.keys(claims).length + 1)
    assert.equal(analyses(v).filter((f) => f.startsWith('.')).length, 1, 'the torn attempt left only its hidden temporary file')
  })
})
