// The session ledger across processes and the tool-call audit ledger (issue 42 items 7, 8),
// through the package API. One Node child recalls and confirms delivery for a session; another
// (an MCP server started later, a restarted host) records feedback for the same session and is
// accepted, while another session is refused. A damaged ledger file is a diagnostic. The audit
// ledger stores hashes only, and the vault's `toolAudit: false` turns it off.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { afterEach, beforeEach, describe, test } from 'node:test'

import { addon, makeTmp, makeVault, noPersonalVault, page, reindexOne, repoRoot, rmDir, runNodeScript } from './helpers.mjs'

const { recordToolCall } = addon
addon.configure({ dense: false })

const QUERY = 'release pipeline staging rollout'
const twin = 'The release pipeline promotes builds to staging before the rollout.'

let base
let v
beforeEach(async () => {
  base = makeTmp()
  noPersonalVault(base)
  v = makeVault(path.join(base, 'vault'), {
    pages: {
      'concepts/release-a.md': page({ title: 'Release Pipeline A', body: twin }),
      'concepts/release-b.md': page({ title: 'Release Pipeline B', body: twin }),
    },
  })
  const r = await reindexOne(v.paths)
  assert.equal(r.ok, true, JSON.stringify(r.errors))
})
afterEach(() => rmDir(base))

const child = (body) => `
  const a = require(${JSON.stringify(path.join(repoRoot, 'index.js'))})
  a.configure({ dense: false })
  const paths = ${JSON.stringify(v.paths)}
  ;(async () => {
    try { ${body} } catch (e) { console.log(JSON.stringify({ error: e.code, message: e.message })) }
  })()`

describe('session ledger across processes', () => {
  test('feedback recorded in a second process for pages the first showed', async () => {
    const first = await runNodeScript(
      child(`
        const policy = { includePersonal: false, minScore: 0.25, maxPerVault: 10, maxResults: 5 }
        const r = await a.recallWiki(paths, ${JSON.stringify(QUERY)}, { policy, mode: 'lexical', session: { id: 'mcp' } })
        const c = await a.confirmRecallShown(paths, { sessionId: 'mcp', config: { recallFeedback: false } })
        console.log(JSON.stringify({ ids: r.results.map((x) => x.id), vaultId: r.results[0].vaultId, status: c.status }))`),
    )
    assert.equal(first.code, 0, first.stderr)
    const shown = JSON.parse(first.stdout.trim().split('\n').pop())
    assert.equal(shown.ids.length, 2, first.stdout)
    assert.ok(fs.existsSync(path.join(v.dotWiki, 'meta', 'recall-ledger.jsonl')))
    const judge = (sessionId, pageId, action) =>
      runNodeScript(
        child(`
          const o = await a.recordRecallFeedback(paths, { sessionId: ${JSON.stringify(sessionId)}, vaultId: ${JSON.stringify(shown.vaultId)}, pageId: ${JSON.stringify(pageId)}, action: ${JSON.stringify(action)} })
          console.log(JSON.stringify({ status: o.status, events: o.events, diagnostics: o.diagnostics }))`),
      ).then((r) => {
        assert.equal(r.code, 0, r.stderr)
        return JSON.parse(r.stdout.trim().split('\n').pop())
      })
    assert.deepEqual(await judge('mcp', shown.ids[0], 'relevant'), { status: 'recorded', events: 1, diagnostics: [] })
    assert.deepEqual(await judge('mcp', shown.ids[1], 'conflict_selected'), { status: 'recorded', events: 1, diagnostics: [] })
    assert.equal((await judge('another-session', shown.ids[0], 'irrelevant')).error, 'feedback_not_shown')
    assert.equal((await judge('mcp', 'concepts/never-shown', 'irrelevant')).error, 'feedback_not_shown')
    // The ledger holds no session id in clear and no query text.
    const ledger = fs.readFileSync(path.join(v.dotWiki, 'meta', 'recall-ledger.jsonl'), 'utf8')
    assert.ok(!ledger.includes('"mcp"') && !ledger.includes('pipeline'), ledger)
    // A damaged ledger: the shown entry survives a torn line and garbage, with a diagnostic.
    fs.appendFileSync(path.join(v.dotWiki, 'meta', 'recall-ledger.jsonl'), '\u0000garbage\n{"v":1,"s":')
    const damaged = await judge('mcp', shown.ids[0], 'cited')
    assert.equal(damaged.status, 'recorded')
    assert.deepEqual(damaged.diagnostics.map((d) => d.code), ['recall_ledger_corrupt'])
  })
})

describe('tool-call audit ledger', () => {
  const auditFile = () => path.join(v.dotWiki, 'meta', 'audit', 'tool-calls.jsonl')

  test('records hashes, duration and outcome, never argument or query text', async () => {
    const secret = 'where is the hunter2 password for prod-db-7'
    const ok = await recordToolCall(v.paths, { tool: 'wiki_recall', args: { query: secret, max_results: 5 }, query: secret, durationMs: 41.6, outcome: 'ok', surface: 'mcp' })
    assert.deepEqual(ok, { status: 'recorded', diagnostics: [] })
    await recordToolCall(v.paths, { tool: 'wiki_recall_feedback', args: { page_id: 'private/salaries' }, durationMs: 3, outcome: 'error', code: 'feedback_not_shown', surface: 'pi' })
    const text = fs.readFileSync(auditFile(), 'utf8')
    for (const raw of ['hunter2', 'prod-db-7', 'private/salaries', 'password']) assert.ok(!text.includes(raw), raw)
    const [a, b] = text.trim().split('\n').map((l) => JSON.parse(l))
    assert.equal(a.tool, 'wiki_recall')
    assert.equal(a.surface, 'mcp')
    assert.match(a.argsHash, /^[0-9a-f]{16}$/)
    assert.match(a.queryHash, /^[0-9a-f]{64}$/)
    assert.equal(a.queryChars, secret.length)
    assert.equal(a.durationMs, 42)
    assert.deepEqual([b.outcome, b.code], ['error', 'feedback_not_shown'])
    await assert.rejects(recordToolCall(v.paths, { tool: '', durationMs: 1, outcome: 'ok' }), { code: 'invalid_argument' })
  })

  test("the vault's toolAudit: false turns it off", async () => {
    const cfgFile = path.join(v.dotWiki, 'config.json')
    const cfg = JSON.parse(fs.readFileSync(cfgFile, 'utf8'))
    fs.writeFileSync(cfgFile, JSON.stringify({ ...cfg, toolAudit: false }))
    const out = await recordToolCall(v.paths, { tool: 'wiki_index', args: {}, durationMs: 1, outcome: 'ok' })
    assert.equal(out.status, 'disabled')
    assert.ok(!fs.existsSync(auditFile()))
  })

  test('LLM_WIKI_TOOL_AUDIT=off turns it off for every vault', async () => {
    const r = await runNodeScript(
      `const a = require(${JSON.stringify(path.join(repoRoot, 'index.js'))})
       a.recordToolCall(${JSON.stringify(v.paths)}, { tool: 'wiki_index', durationMs: 1, outcome: 'ok' }).then((o) => console.log(o.status))`,
      { env: { LLM_WIKI_TOOL_AUDIT: 'off' } },
    )
    assert.equal(r.stdout.trim(), 'disabled', r.stderr)
    assert.ok(!fs.existsSync(auditFile()))
  })
})
