// wiki_resolve_conflict on a vault written here: Pi and MCP give the same codes and the same
// structured result, a repeat is a no-op, and automatic recall then shows the user's decision
// (the other claim historical) instead of asking again.
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, readdirSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { after, before, describe, test } from 'node:test'

import { automaticRecall, wikiReindex, type ToolContext } from '../src/extension.js'
import { mcpWikiResolveConflict, resolutionNotes, validateResolveParams, wikiResolveConflict } from '../src/resolve.js'
import engine from 'llm-wiki-retrieval'
import type { ResolveConflictResult } from 'llm-wiki-retrieval'

function page(fm: Record<string, string>, body: string, extra = ''): string {
  const lines = ['---', ...Object.entries(fm).map(([k, v]) => `${k}: ${JSON.stringify(v)}`)]
  if (extra) lines.push(extra)
  return [...lines, '---', '', body, ''].join('\n')
}

const pages: Record<string, string> = {
  'concepts/cache-ttl.md': page(
    { type: 'concept', title: 'Cache TTL is five minutes' },
    '## Claim\n\nThe zephyrcache entries expire after five minutes.\n\nDisputed by [forever](cache-forever.md).',
    'relations:\n  - target: concepts/cache-forever\n    type: contradicts',
  ),
  'concepts/cache-forever.md': page({ type: 'concept', title: 'Entries are kept forever' }, '## Claim\n\nzephyrcache entries are kept until the process restarts.'),
}

let base: string
let ctx: ToolContext
before(async () => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'pi-resolve-')))
  process.env.WIKI_HOME = join(base, 'no-personal-vault')
  const root = join(base, 'vault')
  mkdirSync(join(root, '.llm-wiki', 'wiki'), { recursive: true })
  writeFileSync(join(root, '.llm-wiki', 'config.json'), JSON.stringify({ name: 'Resolve test vault' }))
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
const choice = { vault: 'project', selected_page_id: 'concepts/cache-ttl', other_page_id: 'concepts/cache-forever', relation: 'supersedes' }

describe('wiki_resolve_conflict', () => {
  test('the schema checks and the engine codes are identical on Pi and MCP', async () => {
    assert.equal(validateResolveParams(choice), null)
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ ...choice, relation: 'refutes' }, 'invalid_argument'],
      [{ ...choice, vault: 'team' }, 'invalid_argument'],
      [{ ...choice, extra: 1 }, 'invalid_argument'],
      [{ ...choice, other_page_id: 'concepts/cache-ttl' }, 'resolution_same_page'],
      [{ ...choice, other_page_id: 'concepts/missing' }, 'resolution_page_missing'],
      [{ ...choice, scope: 'nights' }, 'resolution_scope_invalid'],
      [{ ...choice, relation: 'applies_under' }, 'resolution_scope_invalid'],
    ]
    for (const [params, code] of cases) {
      const pi = await wikiResolveConflict(params, ctx)
      assert.equal(pi.isError, true)
      assert.equal(pi.details.error, code, JSON.stringify(params))
      const mcp = await mcpWikiResolveConflict(params, { root: ctx.cwd })
      assert.equal(mcp.isError, true)
      assert.equal(JSON.parse(mcp.content[0]!.text).code, code)
    }
  })

  test('a decision is recorded once and recall shows it instead of asking again', async () => {
    const before = await automaticRecall(PROMPT, ctx)
    assert.match(before.content, /These claims compete; ask the user which applies: concepts\/cache-ttl vs concepts\/cache-forever\./)
    const pi = await wikiResolveConflict({ ...choice, rationale: 'Measured at 300 s.' }, ctx)
    assert.equal(pi.isError, undefined, pi.content[0]!.text)
    assert.match(pi.content[0]!.text, /^Recorded resolution resolution-[0-9a-f]{32}: concepts\/cache-ttl supersedes concepts\/cache-forever \(concepts\/cache-forever is now historical\)/)
    const mcp = await mcpWikiResolveConflict(choice, { root: ctx.cwd })
    const out = JSON.parse(mcp.content[0]!.text)
    assert.equal(out.ok, true)
    assert.equal(out.result.created, false, 'a repeat is a no-op')
    assert.deepEqual(out.result.resolution, (pi.details as { resolution: unknown }).resolution)
    assert.equal(readdirSync(join(ctx.cwd, '.llm-wiki', 'wiki', 'analyses')).length, 1)
    const after = await automaticRecall(PROMPT, ctx)
    const bundle = after.bundles.find((b) => b.resolution)!
    assert.equal(bundle.resolution!.id, out.result.resolution.id)
    assert.deepEqual(bundle.unresolved, [])
    const forever = [bundle.card!, ...bundle.conflicts].find((i) => i.pageId === 'concepts/cache-forever')!
    assert.equal(forever.historical, true)
    assert.match(after.content, /Resolved by the user \(resolution-[0-9a-f]{32}\): concepts\/cache-ttl supersedes concepts\/cache-forever\./)
    assert.ok(!after.content.includes('ask the user'))
  })

  test('a decision whose feedback event failed says so, and the rebuild replays the event', async () => {
    const wiki = join(ctx.cwd, '.llm-wiki', 'wiki', 'concepts')
    writeFileSync(join(wiki, 'retry-three.md'), page({ type: 'concept', title: 'Retries: three' }, 'The quartzqueue client retries three times.'))
    writeFileSync(join(wiki, 'retry-five.md'), page({ type: 'concept', title: 'Retries: five' }, 'The quartzqueue client retries five times.'))
    // The stream cannot be appended to (a directory in its place): the page is committed, the event is not.
    const stream = join(ctx.cwd, '.llm-wiki', 'meta', 'events.jsonl')
    const aside = `${stream}.aside`
    renameSync(stream, aside)
    mkdirSync(stream, { recursive: true })
    const pi = await wikiResolveConflict({ vault: 'project', selected_page_id: 'concepts/retry-five', other_page_id: 'concepts/retry-three', relation: 'supersedes' }, ctx)
    assert.equal(pi.isError, undefined, pi.content[0]!.text)
    const text = pi.content[0]!.text
    assert.match(text, /^Recorded resolution resolution-[0-9a-f]{32}: concepts\/retry-five supersedes concepts\/retry-three/)
    assert.match(text, /\n⚠ The decision is saved, but its ranking signal \(conflict_selected\) was not recorded; wiki_rebuild_meta replays it/)
    assert.match(text, /\(resolution_feedback_not_recorded: /)
    const result = pi.details as unknown as ResolveConflictResult
    assert.deepEqual(result.warnings.map((w) => w.code), ['resolution_feedback_not_recorded'])
    rmSync(stream, { recursive: true, force: true })
    renameSync(aside, stream)
    // The earlier decision's event is in the stream; only this one is replayed.
    const rb = await engine.rebuildFeedback(engine.resolveVaultPaths(ctx.cwd))
    assert.deepEqual(rb.replayed, [result.resolution.id])
  })

  test('a stale index after a decision is rendered with its cause', () => {
    const r = {
      created: true,
      path: '/v/.llm-wiki/wiki/analyses/resolution-x.md',
      resolution: { id: 'resolution-x' },
      warnings: [],
      index: {
        updated: false,
        stale: true,
        generation: 0,
        issues: [
          { code: 'qmd_index_busy', message: 'another reindex holds the lock' },
          { code: 'resolution_index_stale', message: 'the resolution page is committed but the index does not contain it yet' },
        ],
      },
    } as unknown as ResolveConflictResult
    const notes = resolutionNotes(r).split('\n')
    assert.equal(notes.length, 2)
    assert.match(notes[0]!, /^⚠ Another reindex was running\. \(qmd_index_busy: another reindex holds the lock\)$/)
    assert.match(notes[1]!, /^⚠ The search index does not include the decision yet; run wiki_reindex\. \(resolution_index_stale: /)
    assert.equal(resolutionNotes({ ...r, index: { ...r.index, stale: false } }), '')
  })
})
