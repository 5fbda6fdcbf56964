// Explicit compaction of meta/events.jsonl through the package API: feedbackStatus sizes the
// stream, rebuildFeedback reports progress, compactFeedback (dry run, then for real) moves old
// recall_feedback lines into meta/events-archive/ while every other line stays byte-identical and
// in order and the projection stays the same; a repeat moves nothing; bad options and a busy lock
// reject with their codes.
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { afterEach, beforeEach, describe, test } from 'node:test'

import { NEEDS_HOOKS, addon, eventsLockHolder, makeTmp, makeVault, noPersonalVault, page, reindexOne, rmDir } from './helpers.mjs'

const { compactFeedback, feedbackStatus, rebuildFeedback, ensureVaultId } = addon
addon.configure({ dense: false })

let base
let v
beforeEach(async () => {
  base = makeTmp()
  noPersonalVault(base)
  v = makeVault(path.join(base, 'vault'), {
    pages: {
      'concepts/a.md': page({ title: 'Alpha', body: 'The alpha page.' }),
      'concepts/b.md': page({ title: 'Beta', body: 'The beta page.' }),
    },
  })
  const r = await reindexOne(v.paths)
  assert.equal(r.ok, true, JSON.stringify(r.errors))
})
afterEach(() => rmDir(base))

const DAY = 86_400_000
const actions = ['relevant', 'irrelevant', 'cited', 'opened', 'shown_only', 'shown']

/** Lines (with newline) of a mixed stream and whether each is old feedback (> 360 days). */
function writeStream(vaultId) {
  const lines = []
  for (let i = 0; i < 60; i++) {
    if (i % 4 === 0) {
      lines.push({ text: `{"kind": "observe",  "slug": "n-${i}", "note": "café ${i}"}\n`, old: false })
      continue
    }
    const days = i % 3 === 0 ? 5 : 400 + i
    const e = {
      schema: 1,
      timestamp: new Date(Date.now() - days * DAY).toISOString(),
      visibility: 'internal',
      kind: 'recall_feedback',
      vault_id: vaultId,
      page_id: i % 2 ? 'concepts/a' : 'concepts/b',
      query_hash: crypto.createHash('sha256').update(`q${i % 5}`).digest('hex'),
      mode: 'lexical',
      index_version: '1:1',
      model_version: 'estimate',
      shown_rank: 0,
      action: actions[i % actions.length],
    }
    lines.push({ text: `${JSON.stringify(e)}\n`, old: days > 360 })
  }
  const file = path.join(v.dotWiki, 'meta', 'events.jsonl')
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, lines.map((l) => l.text).join(''))
  return { file, lines }
}

const projection = () => JSON.parse(fs.readFileSync(path.join(v.dotWiki, 'meta', 'recall-feedback.json'), 'utf8'))

function assertSameSums(a, b) {
  for (const k of ['pages', 'queries', 'global']) {
    assert.deepEqual(Object.keys(a[k]).sort(), Object.keys(b[k]).sort(), k)
    for (const [key, s] of Object.entries(a[k])) {
      for (const f of ['signal', 'shownOnly', 'shown_only']) {
        if (s[f] === undefined) continue
        assert.ok(Math.abs(s[f] - b[k][key][f]) <= 1e-9 * Math.max(1, Math.abs(s[f])), `${k} ${key} ${f}`)
      }
    }
  }
  assert.equal(a.events, b.events)
}

describe('compactFeedback', () => {
  test('moves old feedback only, keeps every other line and the projection, and is idempotent', async () => {
    const vaultId = await ensureVaultId(v.paths)
    const { file, lines } = writeStream(vaultId)
    const size = fs.statSync(file).size
    const st = await feedbackStatus(v.paths)
    assert.equal(st.streamBytes, size)
    assert.ok(st.feedbackBytes > 0 && st.compactableBytes > 0, JSON.stringify(st))
    assert.deepEqual(st.issues, [])
    const seen = []
    const rb = await rebuildFeedback(v.paths, { onProgress: (p) => seen.push(p) })
    assert.equal(rb.enabled, true)
    await new Promise((r) => setTimeout(r, 50))
    assert.ok(seen.length >= 1 && seen.at(-1).totalBytes === size, JSON.stringify(seen))
    const before = projection()

    const dry = await compactFeedback(v.paths, { dryRun: true })
    const oldCount = lines.filter((l) => l.old).length
    assert.deepEqual([dry.status, dry.movedLines, dry.lines], ['dry_run', oldCount, lines.length])
    assert.equal(fs.statSync(file).size, size)
    assert.ok(!fs.existsSync(path.join(v.dotWiki, 'meta', 'events-archive')))

    const out = await compactFeedback(v.paths)
    assert.equal(out.status, 'compacted')
    assert.equal(out.movedLines, oldCount)
    assert.equal(fs.readFileSync(file, 'utf8'), lines.filter((l) => !l.old).map((l) => l.text).join(''))
    const archive = fs.readFileSync(path.join(v.dotWiki, 'meta', out.archive), 'utf8')
    assert.equal(archive, lines.filter((l) => l.old).map((l) => l.text).join(''))
    assert.equal(out.bytesBefore, size)
    assert.equal(out.bytesAfter + out.movedBytes, size)
    assertSameSums(projection(), before)
    // A rebuild from the compacted stream gives the same projection.
    await rebuildFeedback(v.paths)
    assertSameSums(projection(), before)

    const again = await compactFeedback(v.paths)
    assert.equal(again.status, 'nothing_to_move')
    const after = await feedbackStatus(v.paths)
    assert.equal(after.archives, 1)
    assert.equal(after.archivedBytes, out.movedBytes)
  })

  test('bad options reject with their codes; no stream is no_stream', async () => {
    assert.equal((await compactFeedback(v.paths)).status, 'no_stream')
    await assert.rejects(compactFeedback(v.paths, { olderThanDays: -1 }), { code: 'invalid_argument' })
  })

  // The holder is a CLI paused while it holds the lock (`LLM_WIKI_PAUSE_AT`): test-hooks builds.
  test('a busy events lock rejects with feedback_lock_busy and moves nothing', { skip: NEEDS_HOOKS }, async () => {
    const vaultId = await ensureVaultId(v.paths)
    const { file } = writeStream(vaultId)
    const bytes = fs.readFileSync(file)
    const holder = await eventsLockHolder(v.root)
    try {
      await assert.rejects(compactFeedback(v.paths), { code: 'feedback_lock_busy' })
      assert.deepEqual(fs.readFileSync(file), bytes)
    } finally {
      assert.equal((await holder.resume()).code, 0)
    }
    assert.equal((await compactFeedback(v.paths)).status, 'compacted')
  })
})
