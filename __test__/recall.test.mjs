// recallWiki: query validation, result shape and scoring bounds, explicit vs automatic policy
// across the project and personal vaults, modes and their fallbacks, and the Pi benchmark vault.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { afterEach, beforeEach, describe, test } from 'node:test'

import {
  AUTOMATIC,
  EXPLICIT,
  addon,
  copyPiBenchVault,
  skipWithoutPiBenchVault,
  editPage,
  makeTmp,
  makeVault,
  noPersonalVault,
  page,
  readJson,
  recallIds,
  reindexOne,
  repoRoot,
  rmDir,
  runCli,
  setWikiHome,
  topicPages,
  uniqueWord,
  writePages,
} from './helpers.mjs'

const { recallWiki, engineInfo } = addon
const MODES = ['lexical', 'hybrid', 'adaptive', 'quality']
// These tests pin the lexical engine and its fallbacks: dense retrieval is switched off so that
// models the environment provides (LLM_WIKI_MODELS_DIR, ~/.cache) cannot change the answers.
// Dense behaviour is covered by dense.test.mjs.
addon.configure({ dense: false })

let base
beforeEach(() => {
  base = makeTmp()
  noPersonalVault(base)
})
afterEach(() => rmDir(base))

async function indexed(dir, pages, config) {
  const v = makeVault(path.join(base, dir), { pages, config })
  const r = await reindexOne(v.paths)
  assert.equal(r.ok, true, JSON.stringify(r.errors))
  return v
}

describe('query validation', () => {
  test('an empty or whitespace-only query resolves with recall_query_empty', async () => {
    const v = await indexed('v', topicPages(2))
    for (const q of ['', '   ', '\n\t  \u3000']) {
      const r = await recallWiki(v.paths, q, { policy: EXPLICIT })
      assert.deepEqual(r.results, [], JSON.stringify(q))
      assert.deepEqual(
        r.diagnostics.map((d) => d.code),
        ['recall_query_empty'],
      )
      assert.ok(Array.isArray(r.trace))
      assert.ok(MODES.includes(r.mode))
    }
  })

  test('exactly 2000 characters are accepted; 2001 are rejected with recall_query_too_long', async () => {
    const v = await indexed('v', topicPages(2))
    assert.equal(engineInfo().queryMaxChars, 2000)
    const ok = await recallWiki(v.paths, 'x'.repeat(2000), { policy: EXPLICIT, mode: 'lexical' })
    assert.ok(!ok.diagnostics.some((d) => d.code.startsWith('recall_query')), JSON.stringify(ok.diagnostics))
    const word = uniqueWord(1)
    const padded = `${word} ${'y'.repeat(2000 - word.length - 1)}`
    assert.equal(padded.length, 2000)
    const hit = await recallWiki(v.paths, padded, { policy: { ...EXPLICIT, minScore: 0 }, mode: 'lexical' })
    assert.equal(hit.results[0]?.id, 'concepts/topic-1', 'a 2000-character query is searched, not truncated away')

    const long = await recallWiki(v.paths, 'x'.repeat(2001), { policy: EXPLICIT, mode: 'lexical' })
    assert.deepEqual(long.results, [])
    assert.deepEqual(
      long.diagnostics.map((d) => d.code),
      ['recall_query_too_long'],
    )
  })

  test('length is counted in characters after normalization, not bytes', async () => {
    const v = await indexed('v', topicPages(1))
    // 2000 two-byte characters, and 2000 decomposed characters (4000 UTF-16 units) that NFKC composes.
    for (const q of ['é'.repeat(2000), 'e\u0301'.repeat(2000), `${' '.repeat(3000)}x`]) {
      const r = await recallWiki(v.paths, q, { policy: EXPLICIT, mode: 'lexical' })
      assert.ok(!r.diagnostics.some((d) => d.code === 'recall_query_too_long'), `length ${q.length}`)
    }
  })

  test('invalid arguments reject with invalid_argument', async () => {
    const v = await indexed('v', topicPages(1))
    const bad = [
      [{ root: 'relative' }, { policy: EXPLICIT }],
      [v.paths, { policy: EXPLICIT, mode: 'semantic' }],
      [v.paths, { policy: { ...EXPLICIT, minScore: 1.5 } }],
      [v.paths, { policy: { ...EXPLICIT, minScore: -0.1 } }],
      [v.paths, { policy: { ...EXPLICIT, minScore: Number.NaN } }],
      [v.paths, { policy: { ...EXPLICIT, maxResults: 0 } }],
      [v.paths, { policy: { ...EXPLICIT, maxPerVault: 0 } }],
    ]
    for (const [paths, opts] of bad) {
      await assert.rejects(recallWiki(paths, 'query', opts), (e) => {
        assert.equal(e.code, 'invalid_argument', `${JSON.stringify(opts)}: ${e.code} ${e.message}`)
        return true
      })
    }
    // Wrong types reject instead of throwing synchronously.
    let p
    assert.doesNotThrow(() => {
      p = recallWiki(v.paths, 42, { policy: EXPLICIT })
    })
    await assert.rejects(p)
    assert.doesNotThrow(() => {
      p = recallWiki(v.paths, 'q', {})
    })
    await assert.rejects(p)
  })
})

describe('results', () => {
  test('result shape, provenance, bounded score and line range', async () => {
    const body = '# Alpha heading\n\nThe zxshapevor passage lives here.\n\n# Other\n\nUnrelated text.'
    const v = await indexed('v', {
      'concepts/shape.md': page({ title: 'Shape card', status: 'stable', tags: ['t1'], body }),
      ...topicPages(3),
    })
    const vaultId = readJson(v.config).vault_id
    const r = await recallWiki(v.paths, 'zxshapevor', { policy: EXPLICIT, mode: 'lexical' })
    assert.equal(r.mode, 'lexical')
    assert.deepEqual(r.diagnostics, [])
    assert.ok(r.trace.length > 0 && r.trace.every((t) => typeof t === 'string'))
    assert.equal(r.results.length, 1)
    const x = r.results[0]
    assert.equal(x.id, 'concepts/shape')
    assert.equal(x.title, 'Shape card')
    assert.equal(x.type, 'concept')
    assert.equal(x.path, path.join(v.wiki, 'concepts', 'shape.md'))
    assert.ok(path.isAbsolute(x.path) && fs.existsSync(x.path))
    assert.equal(x.vaultLabel, undefined)
    assert.equal(x.vault, 'project')
    assert.equal(x.vaultId, vaultId)
    assert.equal(x.role, 'canonical')
    assert.equal(x.status, 'stable')
    assert.equal(x.heading, 'Alpha heading')
    assert.ok(x.preview.startsWith('#Alpha heading — '), x.preview)
    assert.ok(x.preview.includes('zxshapevor'), x.preview)
    assert.ok(x.preview.length <= '#Alpha heading — '.length + 180)
    assert.equal(x.vaultRank, 0)
    assert.ok(x.score >= 0 && x.score <= 1)
    assert.ok(x.confidence >= 0 && x.confidence <= 1)
    assert.ok(x.multiplier >= 0.9 && x.multiplier <= 1.1)
    assert.ok(Math.abs(x.score - Math.min(1, x.confidence * x.multiplier)) < 1e-9)
    assert.ok(x.score >= EXPLICIT.minScore)
    assert.ok(x.fusionScore > 0)
    assert.ok(x.engineScore > 0)
    assert.equal(typeof x.chunkId, 'string')
    assert.ok(x.chunkId.length > 0)
    // The passage's section runs from its heading to the line before the next heading.
    const lines = fs.readFileSync(x.path, 'utf8').split('\n')
    const headingLine = lines.indexOf('# Alpha heading') + 1
    const passageLine = lines.indexOf('The zxshapevor passage lives here.') + 1
    const nextHeading = lines.indexOf('# Other') + 1
    assert.ok(headingLine > 0 && passageLine > headingLine && nextHeading > passageLine)
    assert.equal(x.lineStart, headingLine)
    assert.equal(x.lineEnd, passageLine)
    assert.ok(x.matchReasons.length > 0 && x.matchReasons.every((m) => typeof m === 'string'))

    // A passage without a heading: preview is its text, no heading.
    writePages(v, { 'concepts/plain.md': page({ title: 'Plain', body: 'Plain zxplainvor text without heading.' }) })
    assert.equal((await reindexOne(v.paths)).ok, true)
    const plain = (await recallWiki(v.paths, 'zxplainvor', { policy: EXPLICIT, mode: 'lexical' })).results[0]
    assert.equal(plain.preview, 'Plain zxplainvor text without heading.')
    assert.equal(plain.heading, undefined)
    const plainLine = fs.readFileSync(plain.path, 'utf8').split('\n').indexOf('Plain zxplainvor text without heading.') + 1
    assert.deepEqual([plain.lineStart, plain.lineEnd], [plainLine, plainLine])
  })

  test('results respect maxResults and minScore, ordered by fusion score', async () => {
    const pages = {}
    for (let i = 0; i < 12; i++) {
      pages[`concepts/shared-${i}.md`] = page({ title: `Shared ${i}`, body: `zxcommonvor ${'filler '.repeat(i)}` })
    }
    const v = await indexed('v', pages)
    const r = await recallWiki(v.paths, 'zxcommonvor', {
      policy: { includePersonal: false, minScore: 0.25, maxPerVault: 10, maxResults: 4 },
      mode: 'lexical',
    })
    assert.equal(r.results.length, 4)
    for (let i = 1; i < r.results.length; i++) {
      assert.ok(r.results[i - 1].fusionScore >= r.results[i].fusionScore)
    }
    assert.deepEqual(
      r.results.map((x) => x.vaultRank),
      [0, 1, 2, 3],
    )
    const all = await recallWiki(v.paths, 'zxcommonvor', {
      policy: { includePersonal: false, minScore: 0, maxPerVault: 1000, maxResults: 1000 },
      mode: 'lexical',
    })
    assert.equal(all.results.length, 12)
    assert.equal(new Set(all.results.map((x) => x.id)).size, 12)
    const none = await recallWiki(v.paths, 'zxcommonvor', {
      policy: { includePersonal: false, minScore: 1, maxPerVault: 10, maxResults: 10 },
      mode: 'lexical',
    })
    for (const x of none.results) assert.ok(x.score >= 1)
  })

  test('exact identity matches and the bounded multiplier', async () => {
    const v = await indexed('v', {
      'concepts/rank-fusion.md': page({ title: 'Zxtitlevor Card', aliases: ['Zxaliasvor Name'], body: 'zxbodyvor' }),
      'concepts/deprecated.md': page({ title: 'Old card', status: 'deprecated', body: 'zxdepvor' }),
      'concepts/draft.md': page({ title: 'Draft card', status: 'draft', body: 'zxdraftvor' }),
      'sources/evidence.md': page({ type: 'source', title: 'Evidence', body: 'zxevivor' }),
    })
    const one = async (q) => {
      const r = await recallWiki(v.paths, q, { policy: { ...EXPLICIT, minScore: 0 }, mode: 'lexical' })
      assert.ok(r.results.length > 0, q)
      return r.results[0]
    }
    const near = (a, b) => Math.abs(a - b) < 1e-9
    let x = await one('zxtitlevor card')
    assert.equal(x.id, 'concepts/rank-fusion')
    assert.ok(x.matchReasons.includes('exact_title'), x.matchReasons.join())
    assert.ok(near(x.multiplier, 1.08), `exact + stable canonical: ${x.multiplier}`)
    assert.ok(x.confidence >= 0.95)
    x = await one('Zxaliasvor-name')
    assert.ok(x.matchReasons.includes('exact_alias'), x.matchReasons.join())
    x = await one('concepts/rank-fusion')
    assert.equal(x.id, 'concepts/rank-fusion')
    assert.ok(x.matchReasons.includes('exact_id'), x.matchReasons.join())
    x = await one('rank_fusion')
    assert.equal(x.id, 'concepts/rank-fusion')
    assert.ok(x.matchReasons.includes('exact_filename'), x.matchReasons.join())
    x = await one('zxbodyvor')
    assert.ok(near(x.multiplier, 1.03), `stable canonical: ${x.multiplier}`)
    x = await one('zxdepvor')
    assert.ok(near(x.multiplier, 0.92), `deprecated canonical: ${x.multiplier}`)
    x = await one('zxdraftvor')
    assert.ok(near(x.multiplier, 1.0), `draft canonical: ${x.multiplier}`)
    x = await one('zxevivor')
    assert.equal(x.role, 'evidence')
    assert.ok(near(x.multiplier, 0.98), `evidence: ${x.multiplier}`)
    assert.ok(near(x.score, Math.min(1, x.confidence * 0.98)))
  })

  test('recall follows in-process reindexes (edits, deletions, forced rebuilds) with a warm reader', async () => {
    const v = await indexed('v', topicPages(4))
    assert.deepEqual(await recallIds(v.paths, uniqueWord(1)), ['concepts/topic-1'])
    editPage(v, 'concepts/topic-1.md', page({ title: 'Topic 1', body: 'zxreplacedvor' }))
    fs.rmSync(path.join(v.wiki, 'concepts/topic-2.md'))
    assert.equal((await reindexOne(v.paths)).ok, true)
    assert.deepEqual(await recallIds(v.paths, uniqueWord(1)), [])
    assert.deepEqual(await recallIds(v.paths, 'zxreplacedvor'), ['concepts/topic-1'])
    assert.deepEqual(await recallIds(v.paths, uniqueWord(2)), [])
    writePages(v, { 'concepts/forced.md': page({ title: 'Forced', body: 'zxforcedvor' }) })
    assert.equal((await reindexOne(v.paths, { force: true })).ok, true)
    assert.deepEqual(await recallIds(v.paths, 'zxforcedvor'), ['concepts/forced'])
    assert.deepEqual(await recallIds(v.paths, 'zxreplacedvor'), ['concepts/topic-1'])
  })

  test('recall sees an incremental reindex made by another process', async () => {
    const v = await indexed('v', topicPages(3))
    assert.deepEqual(await recallIds(v.paths, uniqueWord(0)), ['concepts/topic-0'])
    writePages(v, { 'concepts/other-proc.md': page({ title: 'Other', body: 'zxotherprocvor' }) })
    const c = await runCli(['index', v.root, '--component', 'lexical'])
    assert.equal(c.code, 0, c.stderr)
    assert.deepEqual(await recallIds(v.paths, 'zxotherprocvor'), ['concepts/other-proc'])
  })

  test(
    'recall sees a full rebuild (--force) made by another process',
    async () => {
      const v = await indexed('v', topicPages(3))
      // Warm the in-process reader.
      assert.deepEqual(await recallIds(v.paths, uniqueWord(0)), ['concepts/topic-0'])
      writePages(v, { 'concepts/rebuilt.md': page({ title: 'Rebuilt', body: 'zxrebuiltvor' }) })
      const c = await runCli(['index', v.root, '--component', 'lexical', '--force'])
      assert.equal(c.code, 0, c.stderr)
      const s = await addon.readIndexStatus(v.paths)
      assert.equal(s.state, 'ready')
      assert.equal(s.totalDocuments, 4)
      assert.deepEqual(await recallIds(v.paths, 'zxrebuiltvor'), ['concepts/rebuilt'])
    },
  )

  test('a vault without pages returns no results', async () => {
    const v = await indexed('v', {})
    const r = await recallWiki(v.paths, 'anything at all', { policy: EXPLICIT })
    assert.deepEqual(r.results, [])
    assert.deepEqual(r.diagnostics, [])
  })
})

describe('policies and vaults', () => {
  async function twoVaults() {
    const personal = await indexed('home', {
      'concepts/shared.md': page({ title: 'Shared personal copy', body: 'zxsharedvor personal' }),
      'concepts/mine.md': page({ title: 'Mine', body: 'zxminevor' }),
    })
    const project = await indexed('project', {
      'concepts/shared.md': page({ title: 'Shared project copy', body: 'zxsharedvor project' }),
      'concepts/proj.md': page({ title: 'Proj', body: 'zxprojvor' }),
    })
    setWikiHome(personal.root)
    return { personal, project }
  }

  test('explicit recall searches project and personal vaults; personal hits are labelled', async () => {
    const { personal, project } = await twoVaults()
    const r = await recallWiki(project.paths, 'zxminevor', { policy: EXPLICIT, mode: 'lexical' })
    assert.equal(r.results.length, 1)
    const x = r.results[0]
    assert.equal(x.id, 'concepts/mine')
    assert.equal(x.vault, 'personal')
    assert.equal(x.vaultLabel, '📓 personal')
    assert.equal(x.path, path.join(personal.wiki, 'concepts', 'mine.md'))
    assert.equal(x.vaultId, readJson(personal.config).vault_id)
    assert.notEqual(x.vaultId, readJson(project.config).vault_id)

    const p = await recallWiki(project.paths, 'zxprojvor', { policy: EXPLICIT, mode: 'lexical' })
    assert.equal(p.results[0].vault, 'project')
    assert.equal(p.results[0].vaultLabel, undefined)
  })

  test('a page id present in both vaults resolves to the project vault', async () => {
    const { project } = await twoVaults()
    const r = await recallWiki(project.paths, 'zxsharedvor', { policy: EXPLICIT, mode: 'lexical' })
    assert.deepEqual(
      r.results.map((x) => [x.id, x.vault]),
      [['concepts/shared', 'project']],
    )
    assert.equal(r.results[0].title, 'Shared project copy')
    assert.equal(r.results[0].path, path.join(project.wiki, 'concepts', 'shared.md'))
  })

  test('automatic recall searches only the active vault', async () => {
    const { personal, project } = await twoVaults()
    const r = await recallWiki(project.paths, 'zxminevor', { policy: AUTOMATIC, mode: 'lexical' })
    assert.deepEqual(r.results, [])
    assert.deepEqual(r.diagnostics, [])
    const own = await recallWiki(project.paths, 'zxprojvor', { policy: AUTOMATIC, mode: 'lexical' })
    assert.deepEqual(own.results.map((x) => x.id), ['concepts/proj'])
    assert.ok(own.results[0].score >= AUTOMATIC.minScore)
    // When the active vault is the personal vault, its hits are personal.
    const self = await recallWiki(personal.paths, 'zxminevor', { policy: AUTOMATIC, mode: 'lexical' })
    assert.deepEqual(
      self.results.map((x) => [x.id, x.vault, x.vaultLabel]),
      [['concepts/mine', 'personal', '📓 personal']],
    )
  })

  test('a vault without an index: skipped silently by automatic recall, reported by explicit recall', async () => {
    const project = makeVault(path.join(base, 'project'), { pages: topicPages(2) })
    const auto = await recallWiki(project.paths, uniqueWord(0), { policy: AUTOMATIC })
    assert.deepEqual(auto.results, [])
    assert.deepEqual(auto.diagnostics, [])
    const explicit = await recallWiki(project.paths, uniqueWord(0), { policy: EXPLICIT })
    assert.deepEqual(explicit.results, [])
    assert.equal(explicit.diagnostics.length, 1)
    assert.ok(explicit.diagnostics[0].code.startsWith('qmd_'), explicit.diagnostics[0].code)
    assert.equal(explicit.diagnostics[0].code, 'qmd_index_missing')

    // An unindexed personal vault is reported while project results are still returned.
    const personal = makeVault(path.join(base, 'home'), { pages: topicPages(1, { salt: 'p' }) })
    setWikiHome(personal.root)
    assert.equal((await reindexOne(project.paths)).ok, true)
    const both = await recallWiki(project.paths, uniqueWord(0), { policy: EXPLICIT })
    assert.deepEqual(both.results.map((x) => x.id), ['concepts/topic-0'])
    assert.deepEqual(both.diagnostics.map((d) => d.code), ['qmd_index_missing'])
    assert.ok(/personal/.test(both.diagnostics[0].message), both.diagnostics[0].message)
    const bothAuto = await recallWiki(project.paths, uniqueWord(0), { policy: AUTOMATIC })
    assert.deepEqual(bothAuto.diagnostics, [])
  })

  test('WIKI_HOME without a vault: explicit recall just searches the project vault', async () => {
    const project = await indexed('project', topicPages(2))
    noPersonalVault(base)
    const r = await recallWiki(project.paths, uniqueWord(1), { policy: EXPLICIT })
    assert.deepEqual(r.results.map((x) => x.id), ['concepts/topic-1'])
    assert.deepEqual(r.diagnostics, [])
  })
})

describe('modes', () => {
  test('every mode answers; non-lexical modes fall back (traced) until the dense engine lands', async () => {
    const v = await indexed('v', topicPages(3))
    for (const mode of MODES) {
      const r = await recallWiki(v.paths, uniqueWord(2), { policy: EXPLICIT, mode })
      assert.ok(MODES.includes(r.mode), r.mode)
      assert.ok(Array.isArray(r.trace) && r.trace.length > 0)
      assert.ok(r.trace.every((t) => typeof t === 'string'))
      assert.deepEqual(r.diagnostics, [])
      assert.deepEqual(r.results.map((x) => x.id), ['concepts/topic-2'], mode)
      if (mode === 'lexical') {
        assert.equal(r.mode, 'lexical')
        assert.ok(!r.trace.some((t) => t.includes('fallback')), r.trace.join('\n'))
      } else if (r.mode !== mode) {
        assert.ok(r.trace.some((t) => t.includes('fallback')), r.trace.join('\n'))
      }
    }
  })

  test('config.retrievalMode selects the mode; an invalid value is diagnosed, never fatal', async () => {
    const v = await indexed('v', topicPages(2))
    const bad = await recallWiki(v.paths, uniqueWord(1), { policy: EXPLICIT, config: { retrievalMode: 'turbo' } })
    assert.equal(bad.diagnostics[0]?.code, 'config_invalid_retrieval_mode')
    assert.deepEqual(bad.results.map((x) => x.id), ['concepts/topic-1'])
    assert.ok(MODES.includes(bad.mode))

    const lex = await recallWiki(v.paths, uniqueWord(1), { policy: EXPLICIT, config: { retrievalMode: 'lexical' } })
    assert.equal(lex.mode, 'lexical')
    assert.deepEqual(lex.diagnostics, [])
    const dflt = await recallWiki(v.paths, uniqueWord(1), { policy: EXPLICIT, config: {} })
    assert.deepEqual(dflt.diagnostics, [])
    assert.ok(MODES.includes(dflt.mode))
  })
})

describe('Pi benchmark vault', { skip: skipWithoutPiBenchVault() }, () => {
  let bench
  beforeEach(async () => {
    bench = copyPiBenchVault(path.join(base, 'pi'))
    const r = await reindexOne(bench.paths)
    assert.equal(r.ok, true, JSON.stringify(r.errors))
    assert.equal(r.status.totalDocuments, 22)
    assert.deepEqual(r.warnings, [])
  })

  test('automatic recall injects nothing for the negative queries', async () => {
    for (const q of [
      'Flipkart casual mens wear',
      'Razorpay webhook endpoint',
      'hotel trial balance audit',
      'exercise deletion in an admin panel',
      'sales register round off convention',
    ]) {
      for (const mode of MODES) {
        const r = await recallWiki(bench.paths, q, { policy: AUTOMATIC, mode })
        assert.deepEqual(
          r.results.map((x) => `${x.id} ${x.score.toFixed(3)}`),
          [],
          `${q} (${mode})`,
        )
      }
    }
  })

  test('explicit "QMD" ranks entities/qmd first; its alias is an exact match', async () => {
    const qmd = await recallWiki(bench.paths, 'QMD', { policy: EXPLICIT })
    assert.equal(qmd.results[0]?.id, 'entities/qmd')
    assert.equal(qmd.results[0].type, 'entity')
    assert.equal(qmd.results[0].title, 'QMD')
    assert.ok(qmd.results[0].matchReasons.includes('exact_title'), qmd.results[0].matchReasons.join())
    assert.ok(qmd.results.length <= EXPLICIT.maxResults)

    const alias = await recallWiki(bench.paths, 'Query Markup Documents', { policy: EXPLICIT })
    const hit = alias.results.find((x) => x.id === 'entities/qmd')
    assert.ok(hit, JSON.stringify(alias.results.map((x) => x.id)))
    assert.ok(hit.matchReasons.includes('exact_alias'), hit.matchReasons.join())
    assert.equal(alias.results[0].id, 'entities/qmd')

    // NFKC: full-width letters are the same query.
    const wide = await recallWiki(bench.paths, 'ＱＭＤ', { policy: EXPLICIT })
    assert.equal(wide.results[0]?.id, 'entities/qmd')

    const auto = await recallWiki(bench.paths, 'QMD', { policy: AUTOMATIC })
    assert.equal(auto.results[0]?.id, 'entities/qmd')
    assert.ok(auto.results.length <= 3)
  })
})

describe('mode per vault, verification and freshness (issue 12 item 5)', () => {
  test('two vaults answering with different modes: vaultModes per vault, mode = the least capable', async () => {
    const modelRoot = process.env.LLM_WIKI_MODELS_DIR || path.join(repoRoot, '.models')
    if (!fs.existsSync(path.join(modelRoot, 'runtime', 'runtime.json'))) {
      throw new Error(`model root ${modelRoot} is missing: run python3 scripts/fetch_models.py`)
    }
    // The personal vault has no vectors (lexical index only); the project vault has both.
    const personal = await indexed('home', {
      'concepts/mine.md': page({ title: 'Mine', body: 'zxmodevor personal notes on backups' }),
    })
    const project = makeVault(path.join(base, 'project'), {
      pages: { 'concepts/proj.md': page({ title: 'Proj', body: 'zxmodevor project notes on backups' }) },
    })
    setWikiHome(personal.root)
    addon.configure({ modelRoots: [modelRoot], threads: 2, embedModel: null, rerankModel: null, dense: null })
    try {
      const idx = (await addon.reindexWiki(project.paths, { components: ['lexical', 'vectors'] })).results[0].result
      assert.equal(idx.ok, true, JSON.stringify(idx.errors))
      const r = await recallWiki(project.paths, 'zxmodevor backups', {
        policy: { ...EXPLICIT, minScore: 0 },
        mode: 'hybrid',
      })
      assert.deepEqual(
        r.vaultModes.map((v) => [v.vault, v.mode, v.fallbackFrom ?? null]),
        [
          ['project', 'hybrid', null],
          ['personal', 'lexical', 'hybrid'],
        ],
        JSON.stringify(r.vaultModes),
      )
      assert.equal(r.vaultModes[0].vaultId, readJson(project.config).vault_id)
      assert.equal(r.vaultModes[1].vaultId, readJson(personal.config).vault_id)
      assert.equal(r.vaultModes[0].reason, undefined)
      assert.equal(r.vaultModes[1].reason, 'qmd_vectors_missing')
      assert.ok(r.diagnostics.some((d) => d.code === 'qmd_vectors_missing'), JSON.stringify(r.diagnostics))
      // The overall mode is the least capable one any vault ran, not the last vault's.
      assert.equal(r.mode, 'lexical')
      assert.deepEqual(r.results.map((x) => x.vault).sort(), ['personal', 'project'])

      // One vault only: the overall mode is that vault's.
      const own = await recallWiki(project.paths, 'zxmodevor backups', {
        policy: { ...AUTOMATIC, minScore: 0 },
        mode: 'hybrid',
      })
      assert.deepEqual(own.vaultModes.map((v) => [v.vault, v.mode]), [['project', 'hybrid']])
      assert.equal(own.mode, 'hybrid')
    } finally {
      addon.configure({ dense: false })
    }
  })

  test("quality mode passes the vault's intent (config topic + mode) to the cross-encoder", async () => {
    const modelRoot = process.env.LLM_WIKI_MODELS_DIR || path.join(repoRoot, '.models')
    const crossEncoder = path.join(modelRoot, 'test-cross-encoder-int8')
    if (!fs.existsSync(path.join(crossEncoder, 'manifest.json'))) {
      throw new Error(`${crossEncoder} is missing: run python3 scripts/fetch_models.py`)
    }
    const pages = { 'concepts/b.md': page({ title: 'Backups', body: 'Keep three copies of important data off site.' }) }
    const withIntent = makeVault(path.join(base, 'topic'), { pages, config: { name: 'T', topic: 'Home IT', mode: 'ops' } })
    const without = makeVault(path.join(base, 'plain'), { pages, config: { name: 'P' } })
    addon.configure({ modelRoots: [modelRoot], threads: 2, embedModel: null, rerankModel: crossEncoder, dense: null })
    try {
      for (const v of [withIntent, without]) {
        const idx = (await addon.reindexWiki(v.paths, { components: ['lexical', 'vectors'] })).results[0].result
        assert.equal(idx.ok, true, JSON.stringify(idx.errors))
      }
      const q = { policy: { ...AUTOMATIC, minScore: 0 }, mode: 'quality' }
      const a = await recallWiki(withIntent.paths, 'backup copies', q)
      const rescored = a.trace.find((x) => x.includes('cross-encoder rescored'))
      assert.ok(rescored?.includes("with the vault's intent"), a.trace.join('\n'))
      const b = await recallWiki(without.paths, 'backup copies', q)
      const plain = b.trace.find((x) => x.includes('cross-encoder rescored'))
      assert.ok(plain && !plain.includes('intent'), b.trace.join('\n'))
    } finally {
      addon.configure({ dense: false, rerankModel: null })
    }
  })

  test('no vault answered: vaultModes is empty and mode is the requested one', async () => {
    const project = makeVault(path.join(base, 'project'), { pages: topicPages(1) })
    const r = await recallWiki(project.paths, uniqueWord(0), { policy: EXPLICIT, mode: 'quality' })
    assert.deepEqual(r.vaultModes, [])
    assert.equal(r.mode, 'quality')
  })

  test('a current human verification adds +0.02 inside the clamp; stale pages are returned with a warning', async () => {
    const w = uniqueWord(7, 'trust')
    const verified = 'verified:\n  - by: reviewer@example.com\n    at: 2026-08-02T11:00:00Z'
    const v = await indexed('v', {
      'concepts/plain.md': page({ title: 'Plain', body: `${w} alpha` }),
      'concepts/checked.md': page({ title: 'Checked', body: `${w} alpha`, extra: verified }),
      'concepts/by-tool.md': page({
        title: 'By tool',
        body: `${w} alpha`,
        extra: 'verified:\n  - by: pi-llm-wiki/checker\n    at: 2026-08-02T11:00:00Z',
      }),
      'concepts/outdated.md': page({
        title: 'Outdated',
        body: `${w} alpha`,
        extra: `generated:\n  by: pi-llm-wiki/model\n  at: 2026-08-03T00:00:00Z\n${verified}`,
      }),
      'concepts/old.md': page({ title: 'Old', body: `${w} alpha`, extra: 'stale_after: 2000-01-01' }),
      'concepts/future.md': page({ title: 'Future', body: `${w} alpha`, extra: 'stale_after: 2999-01-01' }),
      'sources/gone.md': page({ type: 'source', title: 'Gone', status: 'deprecated', body: `${w} alpha`, extra: 'stale_after: 2001-01-01' }),
    })
    const r = await recallWiki(v.paths, w, { policy: { ...EXPLICIT, minScore: 0, maxResults: 10 }, mode: 'lexical' })
    const by = Object.fromEntries(r.results.map((x) => [x.id, x]))
    // Nothing is dropped for being stale, deprecated or unverified.
    assert.deepEqual(Object.keys(by).sort(), [
      'concepts/by-tool',
      'concepts/checked',
      'concepts/future',
      'concepts/old',
      'concepts/outdated',
      'concepts/plain',
      'sources/gone',
    ])
    const close = (a, b, what) => assert.ok(Math.abs(a - b) < 1e-9, `${what}: ${a} vs ${b}`)
    close(by['concepts/plain'].multiplier, 1.03, 'plain')
    close(by['concepts/checked'].multiplier, 1.05, 'verified')
    close(by['concepts/checked'].score, Math.min(1, by['concepts/checked'].confidence * 1.05), 'verified score')
    assert.equal(by['concepts/checked'].verified, true)
    assert.ok(by['concepts/checked'].matchReasons.includes('verified'))
    assert.deepEqual(by['concepts/checked'].warnings, [])
    // A tool's confirmation is not a human verification; one older than the content is outdated.
    assert.equal(by['concepts/by-tool'].verified, false)
    close(by['concepts/by-tool'].multiplier, 1.03, 'by tool')
    assert.equal(by['concepts/outdated'].verified, false)
    assert.deepEqual(by['concepts/outdated'].warnings, ['verification_outdated'])
    close(by['concepts/outdated'].multiplier, 1.03, 'outdated')
    // Stale: a warning, no penalty.
    assert.deepEqual(by['concepts/old'].warnings, ['stale'])
    assert.equal(by['concepts/old'].staleAfter, '2000-01-01')
    close(by['concepts/old'].multiplier, 1.03, 'stale')
    assert.deepEqual(by['concepts/future'].warnings, [])
    assert.equal(by['concepts/plain'].staleAfter, undefined)
    assert.deepEqual(by['sources/gone'].warnings, ['stale', 'deprecated'])
    close(by['sources/gone'].multiplier, 0.9, 'deprecated evidence')

    // Exact title + stable canonical + verified = 1.10, the clamp's ceiling.
    const t = uniqueWord(8, 'trust')
    writePages(v, { 'concepts/exact.md': page({ title: t, body: 'gamma', extra: verified }) })
    await reindexOne(v.paths)
    const ex = await recallWiki(v.paths, t, { policy: EXPLICIT, mode: 'lexical' })
    assert.equal(ex.results[0]?.id, 'concepts/exact')
    close(ex.results[0].multiplier, 1.1, 'exact verified')
  })
})
