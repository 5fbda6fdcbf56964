// Malformed pages are excluded from the index with a warning carrying the contract's exact
// diagnostic code and the page's path relative to wiki/; reserved names are skipped, symlinks are
// skipped with a warning (link_path_escape / page_symlink_skipped, docs/RELIABILITY.md).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { afterEach, beforeEach, describe, test } from 'node:test'

import {
  addon,
  editPage,
  makeTmp,
  makeVault,
  noPersonalVault,
  page,
  recallIds,
  reindexOne,
  rmDir,
} from './helpers.mjs'

let base
beforeEach(() => {
  base = makeTmp()
  noPersonalVault(base)
})
afterEach(() => rmDir(base))

const nested = (depth) => `---\ntype: concept\nx: ${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}\n---\nzxdepthvor\n`

/** One malformed page per diagnostic code: [code, path under wiki/, text]. */
const MALFORMED = [
  ['frontmatter_missing', 'bad/no-fence.md', '# Just a heading\n\nzxnofencevor body\n'],
  ['frontmatter_missing', 'bad/bom.md', '\uFEFF---\ntype: concept\n---\nzxbomvor\n'],
  ['frontmatter_parse_error', 'bad/unclosed-flow.md', '---\ntype: [unclosed\n---\nzxunclosedvor\n'],
  ['frontmatter_parse_error', 'bad/no-closing-fence.md', '---\ntype: concept\ntitle: open\nzxopenvor\n'],
  ['frontmatter_parse_error', 'bad/top-level-list.md', '---\n- a\n- b\n---\nzxlistvor\n'],
  ['frontmatter_duplicate_key', 'bad/dup.md', '---\ntype: concept\ntitle: a\ntitle: b\n---\nzxdupvor\n'],
  ['frontmatter_duplicate_key', 'bad/dup-nested.md', '---\ntype: concept\nx:\n  y: 1\n  y: 2\n---\nzxdupnestvor\n'],
  ['frontmatter_alias_forbidden', 'bad/alias.md', '---\ntype: concept\nx: &a 1\ny: *a\n---\nzxaliasvor\n'],
  ['frontmatter_alias_forbidden', 'bad/anchor.md', '---\ntype: concept\nx: &anchor 1\n---\nzxanchorvor\n'],
  ['frontmatter_custom_tag_forbidden', 'bad/tag.md', '---\ntype: concept\nx: !custom 1\n---\nzxtagvor\n'],
  ['frontmatter_multiple_documents', 'bad/multi.md', '---\ntype: concept\n...\n---\nb: 1\n---\nzxmultivor\n'],
  ['frontmatter_multiple_documents', 'bad/empty-fm.md', '---\n---\nzxemptyfmvor\n'],
  [
    'frontmatter_limit_bytes',
    'bad/huge.md',
    `---\ntype: concept\nx: "${'y'.repeat(128 * 1024)}"\n---\nzxhugevor\n`,
  ],
  ['frontmatter_limit_depth', 'bad/deep.md', nested(33)],
  ['concept_missing_type', 'bad/no-type.md', '---\ntitle: no type\n---\nzxnotypevor\n'],
  ['concept_missing_type', 'bad/blank-type.md', '---\ntype: "  "\n---\nzxblanktypevor\n'],
  ['concept_missing_type', 'bad/numeric-type.md', '---\ntype: 3\n---\nzxnumtypevor\n'],
]

const VALID = {
  'concepts/good.md': page({ title: 'Good', body: 'zxgoodvor lives here' }),
  'concepts/deep-ok.md': nested(32).replace('zxdepthvor', 'zxdeepokvor'),
  'concepts/crlf.md': '---\r\ntype: concept\r\ntitle: CRLF\r\n---\r\nzxcrlfvor text\r\n',
  'concepts/UPPER-EXT.MD': page({ title: 'Upper ext', body: 'zxupperextvor' }),
  '.hidden/visible.md': page({ type: 'source', title: 'Hidden dir page', body: 'zxhiddenvor' }),
  'deep/er/nest/page.md': page({ type: 'analysis', title: 'Nested', body: 'zxnestedvor' }),
  'concepts/Foo.md': page({ title: 'Foo upper', body: 'zxfooupvor' }),
}

describe('malformed pages', () => {
  test('every malformed page is excluded with its exact code and wiki-relative path', async () => {
    const pages = { ...VALID }
    for (const [, rel, text] of MALFORMED) pages[rel] = text
    // Identity collision: differs from concepts/Foo.md only in case (sorted after it).
    pages['concepts/foo.md'] = page({ title: 'foo lower', body: 'zxfoolowvor' })
    // Reserved names: never indexed, no warning.
    pages['index.md'] = page({ title: 'Index', body: 'zxindexvor' })
    pages['log.md'] = page({ title: 'Log', body: 'zxlogvor' })
    pages['concepts/Index.md'] = page({ title: 'Nested index', body: 'zxnestedindexvor' })
    pages['concepts/LOG.md'] = page({ title: 'Nested log', body: 'zxnestedlogvor' })
    // Not Markdown.
    pages['concepts/notes.txt'] = page({ title: 'Text', body: 'zxtxtvor' })
    const v = makeVault(path.join(base, 'v'), { pages })
    // A symlinked page (even to a valid page inside the vault) is not followed, with a warning:
    // link_path_escape when it points outside the vault, page_symlink_skipped otherwise.
    const outside = path.join(base, 'outside.md')
    fs.writeFileSync(outside, page({ title: 'Outside', body: 'zxoutsidevor' }))
    fs.symlinkSync(outside, path.join(v.wiki, 'concepts', 'link-out.md'))
    fs.symlinkSync(path.join(v.wiki, 'concepts', 'good.md'), path.join(v.wiki, 'concepts', 'link-in.md'))

    const r = await reindexOne(v.paths)
    assert.equal(r.ok, true, JSON.stringify(r.errors))

    const got = r.warnings
      .filter((w) => w.code !== 'vectors_unavailable')
      .map((w) => [w.code, w.path])
      .sort()
    const want = [
      ...MALFORMED.map(([code, rel]) => [code, rel]),
      ['concept_identity_collision', 'concepts/foo.md'],
      ['link_path_escape', 'concepts/link-out.md'],
      ['page_symlink_skipped', 'concepts/link-in.md'],
    ].sort()
    assert.deepEqual(got, want)
    for (const w of r.warnings) assert.ok(w.message.length > 0)

    const validCount = Object.keys(VALID).length
    assert.equal(r.documents.indexed, validCount)
    assert.equal(r.status.totalDocuments, validCount)
    assert.equal(r.status.state, 'ready', JSON.stringify(r.status.issues))

    // Valid pages are searchable; excluded, reserved, symlinked and non-Markdown ones are not.
    assert.deepEqual(await recallIds(v.paths, 'zxgoodvor'), ['concepts/good'])
    assert.deepEqual(await recallIds(v.paths, 'zxdeepokvor'), ['concepts/deep-ok'])
    assert.deepEqual(await recallIds(v.paths, 'zxcrlfvor'), ['concepts/crlf'])
    assert.deepEqual(await recallIds(v.paths, 'zxupperextvor'), ['concepts/UPPER-EXT'])
    assert.deepEqual(await recallIds(v.paths, 'zxhiddenvor'), ['.hidden/visible'])
    assert.deepEqual(await recallIds(v.paths, 'zxnestedvor'), ['deep/er/nest/page'])
    assert.deepEqual(await recallIds(v.paths, 'zxfooupvor'), ['concepts/Foo'])
    for (const word of [
      'zxfoolowvor',
      'zxindexvor',
      'zxlogvor',
      'zxnestedindexvor',
      'zxnestedlogvor',
      'zxtxtvor',
      'zxoutsidevor',
      'zxnofencevor',
      'zxdupvor',
      'zxaliasvor',
      'zxtagvor',
      'zxmultivor',
      'zxhugevor',
      'zxdepthvor',
      'zxnotypevor',
    ]) {
      assert.deepEqual(await recallIds(v.paths, word), [], word)
    }

    // An unchanged vault reports the same warnings again (the exclusion is remembered, not forgotten).
    const again = await reindexOne(v.paths)
    assert.equal(again.ok, true)
    assert.deepEqual(
      again.warnings
        .filter((w) => w.code !== 'vectors_unavailable')
        .map((w) => [w.code, w.path])
        .sort(),
      want,
    )
    assert.equal(again.documents.unchanged, validCount)
  })

  test('a page that becomes malformed is removed from the index; fixing it brings it back', async () => {
    const v = makeVault(path.join(base, 'v'), {
      pages: {
        'concepts/a.md': page({ title: 'A', body: 'zxpageavor' }),
        'concepts/b.md': page({ title: 'B', body: 'zxpagebvor' }),
      },
    })
    assert.equal((await reindexOne(v.paths)).ok, true)
    editPage(v, 'concepts/a.md', '---\ntype: concept\ntype: dup\n---\nzxpageavor\n')
    const broken = await reindexOne(v.paths)
    assert.equal(broken.ok, true)
    assert.equal(broken.documents.removed, 1)
    assert.deepEqual(
      broken.warnings.map((w) => [w.code, w.path]),
      [['frontmatter_duplicate_key', 'concepts/a.md']],
    )
    assert.equal(broken.status.totalDocuments, 1)
    assert.deepEqual(await recallIds(v.paths, 'zxpageavor'), [])

    editPage(v, 'concepts/a.md', page({ title: 'A', body: 'zxpageavor again' }), 20)
    const fixed = await reindexOne(v.paths)
    assert.equal(fixed.ok, true)
    assert.equal(fixed.documents.indexed, 1)
    assert.deepEqual(fixed.warnings, [])
    assert.equal(fixed.status.totalDocuments, 2)
    assert.deepEqual(await recallIds(v.paths, 'zxpageavor'), ['concepts/a'])
  })

  test('a symlinked wiki directory pointing outside the vault is not read', async () => {
    const elsewhere = path.join(base, 'elsewhere')
    fs.mkdirSync(elsewhere)
    fs.writeFileSync(path.join(elsewhere, 'p.md'), page({ title: 'P', body: 'zxelsewherevor' }))
    const root = path.join(base, 'v')
    fs.mkdirSync(path.join(root, '.llm-wiki'), { recursive: true })
    fs.writeFileSync(path.join(root, '.llm-wiki', 'config.json'), '{}')
    fs.symlinkSync(elsewhere, path.join(root, '.llm-wiki', 'wiki'))
    const r = await reindexOne({ root })
    assert.equal(r.status.totalDocuments, 0)
    assert.ok(r.warnings.some((w) => w.code === 'link_path_escape'), JSON.stringify(r.warnings))
    assert.deepEqual(await recallIds({ root }, 'zxelsewherevor'), [])
  })
})

test('page metadata: role from type, title default, status lower-cased', async () => {
  const v = makeVault(path.join(base, 'v'), {
    pages: {
      'concepts/c.md': page({ type: ' Concept ', title: 'Card', status: 'Stable', body: 'zxrolecvor' }),
      'sources/s.md': page({ type: 'source', body: 'zxrolesvor' }),
      'misc/w.md': page({ type: 'weird-kind', title: 'Weird', body: 'zxrolewvor' }),
    },
  })
  const r = await reindexOne(v.paths)
  assert.equal(r.ok, true)
  assert.equal(r.status.canonicalDocuments, 1)
  assert.equal(r.status.evidenceDocuments, 2)
  const policy = { includePersonal: false, minScore: 0, maxPerVault: 10, maxResults: 5 }
  const c = (await addon.recallWiki(v.paths, 'zxrolecvor', { policy, mode: 'lexical' })).results[0]
  assert.equal(c.role, 'canonical')
  assert.equal(c.status, 'stable')
  assert.equal(c.title, 'Card')
  const s = (await addon.recallWiki(v.paths, 'zxrolesvor', { policy, mode: 'lexical' })).results[0]
  assert.equal(s.role, 'evidence')
  assert.equal(s.title, 's', 'title defaults to the last id segment')
  assert.equal(s.type, 'source')
  const w = (await addon.recallWiki(v.paths, 'zxrolewvor', { policy, mode: 'lexical' })).results[0]
  assert.equal(w.role, 'evidence')
})
