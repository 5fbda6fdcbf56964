// Process lifecycle: a Node process exits on its own right after awaited calls (no handle kept
// alive by progress callbacks or abort signals), panics reject with internal_panic without
// harming the process, the synchronous exports, and the CLI's exit codes.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { afterEach, beforeEach, describe, test } from 'node:test'

import {
  EXPLICIT,
  NEEDS_HOOKS,
  PANIC_MARKER,
  addon,
  makeTmp,
  makeVault,
  nativePanic,
  noPersonalVault,
  recallIds,
  reindexOne,
  repoRoot,
  rmDir,
  runCli,
  runNodeScript,
  setWikiHome,
  topicPages,
  uniqueWord,
} from './helpers.mjs'

let base
beforeEach(() => {
  base = makeTmp()
  noPersonalVault(base)
})
afterEach(() => rmDir(base))

const indexJs = JSON.stringify(path.join(repoRoot, 'index.js'))

/** Run `body` (CommonJS, `addon` and `paths` in scope) in a child; it must exit 0 by itself. */
async function childMustExit(v, body, { hooks = false } = {}) {
  const source = `
    const addon = require(${indexJs});
    const paths = { root: process.env.VAULT_ROOT };
    (async () => { ${body} })().then(
      () => console.log('DONE'),
      (e) => { console.error('FAILED', e); process.exitCode = 3 },
    );
  `
  const started = Date.now()
  const c = await runNodeScript(source, {
    env: { VAULT_ROOT: v.root, WIKI_HOME: process.env.WIKI_HOME, LLM_WIKI_TEST_PANIC: hooks ? PANIC_MARKER : '' },
    timeoutMs: 20_000,
  })
  assert.equal(c.signal, null, c.stderr)
  assert.equal(c.code, 0, `exit ${c.code}\n${c.stderr}`)
  assert.ok(c.stdout.includes('DONE'), c.stdout)
  return { ...c, ms: Date.now() - started }
}

describe('process exit', () => {
  test('exits with code 0 right after awaited reindexWiki and recallWiki', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(5) })
    await childMustExit(
      v,
      `
      const r = await addon.reindexWiki(paths, { components: ['lexical'] });
      if (!r.results[0].result.ok) throw new Error('reindex failed');
      const rec = await addon.recallWiki(paths, ${JSON.stringify(uniqueWord(3))}, {
        policy: { includePersonal: true, minScore: 0.25, maxPerVault: 10, maxResults: 5 },
      });
      if (rec.results[0].id !== 'concepts/topic-3') throw new Error('recall failed');
    `,
    )
  })

  test('exits with code 0 after calls that used onProgress and an AbortSignal', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(50) })
    await childMustExit(
      v,
      `
      const ac = new AbortController();
      let events = 0;
      const r = await addon.reindexWiki(paths, {
        components: ['lexical'], signal: ac.signal, onProgress: () => { events++ },
      });
      if (!r.results[0].result.ok) throw new Error('reindex failed');
      const rec = await addon.recallWiki(paths, 'fact', {
        policy: { includePersonal: false, minScore: 0, maxPerVault: 10, maxResults: 3 }, signal: ac.signal,
      });
      if (rec.results.length !== 3) throw new Error('recall failed');
      await addon.readIndexStatus(paths);
    `,
    )
  })

  test('exits with code 0 after a cancelled reindex and after rejected calls', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(5) })
    await childMustExit(
      v,
      `
      const r = await addon.reindexWiki(paths, { components: ['lexical'], signal: AbortSignal.abort() });
      if (r.results[0].result.ok !== false) throw new Error('expected a cancelled run');
      await addon.reindexWiki({ root: 'relative' }).then(() => { throw new Error('expected a rejection') }, () => {});
      if (process.env.LLM_WIKI_TEST_PANIC) {
        const policy = { includePersonal: false, minScore: 0, maxPerVault: 1, maxResults: 1 };
        await addon.recallWiki(paths, process.env.LLM_WIKI_TEST_PANIC + ' child panic', { policy }).then(() => { throw new Error('expected a rejection') }, (e) => {
          if (e.code !== 'internal_panic') throw e;
        });
      }
    `,
      { hooks: !NEEDS_HOOKS },
    )
  })
})

describe('panics', () => {
  test('a panic on a job thread rejects with internal_panic and the process keeps working', { skip: NEEDS_HOOKS }, async () => {
    for (const msg of ['x', 'second panic', 'third']) {
      await assert.rejects(nativePanic(msg), (e) => {
        assert.equal(e.code, 'internal_panic')
        assert.ok(e instanceof Error)
        assert.ok(e.message.includes(msg), e.message)
        return true
      })
    }
    assert.equal(addon.engineInfo().queryMaxChars, 2000)
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(2) })
    assert.equal((await reindexOne(v.paths)).ok, true)
    assert.deepEqual(await recallIds(v.paths, uniqueWord(1)), ['concepts/topic-1'])
    assert.equal((await addon.readIndexStatus(v.paths)).state, 'ready')
  })
})

describe('synchronous exports', () => {
  test('engineInfo reports the engine, its format and the policy floors', () => {
    const info = addon.engineInfo()
    assert.equal(info.name, 'llm-wiki-retrieval')
    assert.match(info.version, /^\d+\.\d+\.\d+/)
    assert.equal(info.version, JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')).version)
    assert.equal(typeof info.indexFormatVersion, 'number')
    assert.equal(info.queryMaxChars, 2000)
    assert.equal(info.explicitFloor, EXPLICIT.minScore)
    assert.equal(info.automaticFloor, 0.5)
  })

  test('personalVaultPaths follows WIKI_HOME (new layout)', () => {
    const home = setWikiHome(path.join(base, 'home'))
    const p = addon.personalVaultPaths()
    assert.equal(p.root, home)
    assert.equal(p.dotWiki, path.join(home, '.llm-wiki'))
    assert.equal(p.wiki, path.join(home, '.llm-wiki', 'wiki'))
    assert.equal(p.meta, path.join(home, '.llm-wiki', 'meta'))
    assert.equal(p.qmdSwap, path.join(home, '.llm-wiki', 'meta', 'qmd', 'swap.json'))
  })

  test('resolveVaultPaths: the cwd vault, else WIKI_HOME; relative cwd throws invalid_argument', () => {
    const project = makeVault(path.join(base, 'project'), { pages: {} })
    const home = setWikiHome(path.join(base, 'home'))
    assert.equal(addon.resolveVaultPaths(project.root).root, project.root)
    const nested = path.join(project.root, 'src', 'deep')
    fs.mkdirSync(nested, { recursive: true })
    // The contract checks $WIKI_HOME before walking up to an ancestor vault.
    assert.equal(addon.resolveVaultPaths(nested).root, home)
    delete process.env.WIKI_HOME
    try {
      assert.equal(addon.resolveVaultPaths(nested).root, project.root)
    } finally {
      noPersonalVault(base)
    }
    assert.throws(() => addon.resolveVaultPaths('relative/dir'), (e) => e.code === 'invalid_argument')
  })
})

describe('command line', () => {
  test('index, status and recall through bin/llm-wiki-retrieval.js', async () => {
    const v = makeVault(path.join(base, 'v'), { pages: topicPages(3) })
    const env = { WIKI_HOME: process.env.WIKI_HOME }
    const idx = await runCli(['index', v.root, '--component', 'lexical', '--json'], { env })
    assert.equal(idx.code, 0, idx.stderr)
    const r = JSON.parse(idx.stdout)
    assert.equal(r.ok, true)
    assert.equal(r.status.totalDocuments, 3)

    const st = await runCli(['status', v.root, '--json'], { env })
    assert.equal(st.code, 0, st.stderr)
    assert.equal(JSON.parse(st.stdout).state, 'ready')

    const rec = await runCli(['recall', v.root, uniqueWord(2), '--json', '--mode', 'lexical'], { env })
    assert.equal(rec.code, 0, rec.stderr)
    assert.deepEqual(
      JSON.parse(rec.stdout).results.map((x) => x.id),
      ['concepts/topic-2'],
    )

    const bad = await runCli(['recall', v.root, 'q', '--mode', 'nope'], { env })
    assert.equal(bad.code, 1)
    assert.ok(bad.stderr.includes('invalid_argument'), bad.stderr)
    const usage = await runCli(['frobnicate'], { env })
    assert.equal(usage.code, 2, usage.stderr)
  })
})
