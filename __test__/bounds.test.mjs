// Bounds on input from JS: thread counts are clamped, sub-queries pass the query's checks and a
// count limit, and downloadModel only writes inside its model directory, from a pinned commit,
// with a known checksum per file (served here by a loopback HTTP server, never the internet).
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { describe, test } from 'node:test'

import { EXPLICIT, addon, makeVault, noPersonalVault, reindexOne, runCli, tmpDir, topicPages, uniqueWord } from './helpers.mjs'

const LEXICAL = { policy: EXPLICIT, mode: 'lexical' }

describe('threads', () => {
  test('a huge reindex thread count is clamped (the process never runs more threads than the cores allow)', { skip: process.platform !== 'linux' && 'reads /proc/self/status' }, async (t) => {
    const base = tmpDir(t)
    noPersonalVault(base)
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(3000, { salt: 'th' }) })
    const threadsNow = () => Number(/^Threads:\s+(\d+)/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1])
    const before = threadsNow()
    let peak = before
    let running = true
    // -1 arrives as 4294967295 (napi's unsigned conversion): one thread per page before the clamp.
    const job = reindexOne(v.paths, { force: true, threads: -1 }).finally(() => {
      running = false
    })
    while (running) {
      peak = Math.max(peak, threadsNow())
      await new Promise((resolve) => setImmediate(resolve))
    }
    const r = await job
    assert.equal(r.ok, true, JSON.stringify(r.errors))
    assert.equal(r.status.totalDocuments, 3000)
    // Our threads for one reindex: its job thread, ≤ cores page workers, and tantivy's writer
    // (≤ 4 indexing threads, 4 merge threads, a segment updater, a doc-store compressor).
    const bound = 16 + os.availableParallelism()
    t.diagnostic(`threads: ${before} before, peak ${peak} (bound ${before} + ${bound})`)
    assert.ok(peak - before <= bound, `peak ${peak} threads with ${before} before the reindex`)
  })
})

describe('sub-queries', () => {
  test('checked like the query: over-long or empty resolves with its diagnostic; more than 10 rejects', async (t) => {
    const base = tmpDir(t)
    noPersonalVault(base)
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(3) })
    assert.equal((await reindexOne(v.paths)).ok, true)
    const q = uniqueWord(1)
    const ok = await addon.recallWiki(v.paths, q, { ...LEXICAL, subqueries: [{ type: 'lex', query: ` ${uniqueWord(2)} ` }] })
    assert.deepEqual(ok.diagnostics, [])
    assert.deepEqual(ok.results.map((r) => r.id), ['concepts/topic-1'])

    const long = await addon.recallWiki(v.paths, q, { ...LEXICAL, subqueries: [{ type: 'lex', query: q }, { type: 'vec', query: 'a'.repeat(2001) }] })
    assert.deepEqual(long.results, [])
    assert.deepEqual(long.diagnostics.map((d) => d.code), ['recall_query_too_long'])
    assert.match(long.diagnostics[0].message, /subqueries\[1\]/)

    const empty = await addon.recallWiki(v.paths, q, { ...LEXICAL, subqueries: [{ type: 'lex', query: ' \n ' }] })
    assert.deepEqual(empty.diagnostics.map((d) => d.code), ['recall_query_empty'])

    const ten = Array.from({ length: 10 }, (_, i) => ({ type: 'lex', query: uniqueWord(i % 3) }))
    assert.equal((await addon.recallWiki(v.paths, q, { ...LEXICAL, subqueries: ten })).diagnostics.length, 0)
    await assert.rejects(addon.recallWiki(v.paths, q, { ...LEXICAL, subqueries: [...ten, { type: 'lex', query: q }] }), (e) => {
      assert.equal(e.code, 'invalid_argument')
      assert.match(e.message, /subqueries has 11 entries; the maximum is 10/)
      return true
    })
  })
})

describe('downloadModel', () => {
  const COMMIT = 'a'.repeat(40)
  const sha = (b) => createHash('sha256').update(b).digest('hex')
  const MODEL = Buffer.from('not really an onnx model, but bytes with a checksum')
  const TOKENIZER = Buffer.from('{"version":"1.0"}')

  /** A hub-shaped loopback server: `/{repo}/resolve/{rev}/{path}`; counts requests. */
  async function hub(t) {
    const files = { 'onnx/model.onnx': MODEL, 'tokenizer.json': TOKENIZER }
    const seen = []
    const server = http.createServer((req, res) => {
      seen.push(req.url)
      const m = /^\/org\/model\/resolve\/([^/]+)\/(.+)$/.exec(req.url)
      const body = m && files[m[2]]
      if (!body) {
        res.writeHead(404).end()
        return
      }
      res.writeHead(200, { 'content-length': body.length }).end(body)
    })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    t.after(() => new Promise((resolve) => server.close(resolve)))
    return { baseUrl: `http://127.0.0.1:${server.address().port}`, seen }
  }

  function options(baseUrl, dir, files) {
    return {
      dir,
      baseUrl,
      repo: 'org/model',
      revision: COMMIT,
      id: 'org/model:test',
      files: files ?? [
        { remote: 'onnx/model.onnx', local: 'model.onnx', sha256: sha(MODEL) },
        { remote: 'tokenizer.json', local: 'tokenizer.json', sha256: sha(TOKENIZER) },
      ],
    }
  }

  test('downloads a pinned commit with checksums into the model directory', async (t) => {
    const { baseUrl, seen } = await hub(t)
    const dir = path.join(tmpDir(t), 'model')
    const m = await addon.downloadModel(options(baseUrl, dir))
    assert.equal(m.dir, dir)
    assert.deepEqual(fs.readFileSync(path.join(dir, 'model.onnx')), MODEL)
    assert.ok(seen.every((u) => u.includes(`/resolve/${COMMIT}/`)), seen.join())
  })

  test('a local name outside the model directory rejects with invalid_argument and writes nothing', async (t) => {
    const { baseUrl, seen } = await hub(t)
    const base = tmpDir(t)
    const dir = path.join(base, 'models', 'model')
    fs.mkdirSync(dir, { recursive: true })
    fs.mkdirSync(path.join(base, 'outside'))
    fs.symlinkSync(path.join(base, 'outside'), path.join(dir, 'link'), 'dir')
    const escapes = ['../escaped.onnx', '../../escaped.onnx', path.join(base, 'abs.onnx'), 'sub/../../escaped.onnx', 'C:\\escaped.onnx', 'C:escaped.onnx', '\\\\server\\share\\escaped.onnx', '..\\escaped.onnx', 'link/escaped.onnx', 'manifest.json']
    for (const local of escapes) {
      const files = [
        { remote: 'onnx/model.onnx', local, sha256: sha(MODEL) },
        { remote: 'tokenizer.json', local: 'tokenizer.json', sha256: sha(TOKENIZER) },
      ]
      await assert.rejects(addon.downloadModel(options(baseUrl, dir, files)), (e) => e.code === 'invalid_argument', local)
    }
    assert.deepEqual(seen, [], 'nothing was fetched')
    const written = fs.readdirSync(base, { recursive: true }).filter((f) => f.includes('escaped') || f.includes('abs.onnx'))
    assert.deepEqual(written, [])
    assert.deepEqual(fs.readdirSync(path.join(base, 'outside')), [])
  })

  test('a branch revision or a file without a checksum rejects with invalid_argument', async (t) => {
    const { baseUrl, seen } = await hub(t)
    const dir = path.join(tmpDir(t), 'model')
    await assert.rejects(addon.downloadModel({ ...options(baseUrl, dir), revision: 'main' }), (e) => e.code === 'invalid_argument')
    const unchecked = [
      { remote: 'onnx/model.onnx', local: 'model.onnx' },
      { remote: 'tokenizer.json', local: 'tokenizer.json', sha256: sha(TOKENIZER) },
    ]
    await assert.rejects(addon.downloadModel(options(baseUrl, dir, unchecked)), (e) => e.code === 'invalid_argument')
    assert.deepEqual(seen, [])
    assert.equal(fs.existsSync(dir), false)
  })

  test('prefixes and chunkTokens reach the manifest; a second call updates them in place or refuses a vector change', async (t) => {
    const { baseUrl, seen } = await hub(t)
    const dir = path.join(tmpDir(t), 'model')
    const manifest = () => JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'))
    await addon.downloadModel({ ...options(baseUrl, dir), queryPrefix: 'query: ', documentPrefix: 'passage: ', chunkTokens: 96 })
    assert.deepEqual([manifest().queryPrefix, manifest().documentPrefix, manifest().chunkTokens], ['query: ', 'passage: ', 96])
    const fetched = seen.length
    await addon.downloadModel({ ...options(baseUrl, dir), chunkTokens: 128 })
    assert.deepEqual([manifest().queryPrefix, manifest().chunkTokens], ['query: ', 128])
    assert.equal(seen.length, fetched, 'nothing downloaded again')
    await assert.rejects(addon.downloadModel({ ...options(baseUrl, dir), documentPrefix: 'doc: ' }), (e) => {
      assert.equal(e.code, 'invalid_argument')
      assert.match(e.message, /documentPrefix.*new id/)
      return true
    })
    await assert.rejects(addon.downloadModel({ ...options(baseUrl, path.join(dir, '..', 'other')), chunkTokens: 8 }), (e) => e.code === 'invalid_argument')
    assert.equal(manifest().documentPrefix, 'passage: ')
  })

  test('the CLI downloads the same way and updates chunkTokens in place', async (t) => {
    const { baseUrl, seen } = await hub(t)
    const dir = path.join(tmpDir(t), 'model')
    const args = ['download', '--dir', dir, '--base-url', baseUrl, '--repo', 'org/model', '--revision', COMMIT, '--id', 'org/model:test',
      '--file', `onnx/model.onnx:model.onnx:${sha(MODEL)}`, '--file', `tokenizer.json:tokenizer.json:${sha(TOKENIZER)}`]
    const first = await runCli([...args, '--chunk-tokens', '96', '--json'])
    assert.equal(first.code, 0, first.stderr)
    assert.equal(JSON.parse(first.stdout).manifest.chunkTokens, 96)
    assert.deepEqual(fs.readFileSync(path.join(dir, 'model.onnx')), MODEL)
    const fetched = seen.length
    const second = await runCli([...args, '--chunk-tokens', '0'])
    assert.equal(second.code, 0, second.stderr)
    assert.match(second.stdout, /^org\/model:test ready in .*: embed, 384 dims, chunks engine default/)
    assert.equal(seen.length, fetched, 'nothing downloaded again')
    const bad = await runCli([...args, '--file', 'no-colons'])
    assert.equal(bad.code, 1)
    assert.match(bad.stderr, /invalid_argument.*REMOTE:LOCAL:SHA256/)
  })
})
