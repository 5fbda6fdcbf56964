// `npm run test:client`: the real client, pi-llm-wiki, on this engine.
//
//  1. Copy the client snapshot ($PI_LLM_WIKI_SRC, else $LLM_WIKI_SHARED/upstream/pi-llm-wiki, else
//     ../shared/upstream/pi-llm-wiki) into a temp
//     dir and apply examples/pi-llm-wiki/client.patch (qmd-indexing.ts becomes a re-export of
//     `llm-wiki-retrieval/qmd-indexing`; recall.ts, index.ts and mcp/operations.ts recall
//     through `recallWiki`; automatic injection renders `recallMemory` bundles (lib/memory.ts,
//     with the wiki_resolve_conflict / wiki_recall_feedback tools and the feedback hooks); the
//     tests that asserted the old engine's internals are replaced, see docs/INTEGRATION.md).
//     To change the patch: copy the snapshot, `git init` + commit it, `git apply` the patch,
//     edit, then `git add -A` (without package-lock.json / node_modules) and
//     `git diff --cached <snapshot commit>` > client.patch.
//  2. Stage this package (index.js, index.d.ts, qmd-indexing.*, binding.js, the built addon)
//     as a local dependency of the client, install with `npm install --ignore-scripts` (the npm
//     registry only), and fetch Node 22 from npm (`node-<platform>-<arch>@22`) when the system
//     Node is older (the client's `engines`).
//  3. `tsc --noEmit` and vitest on the eight retrieval test files, under Node 22, with the
//     repository's models (.models, or $LLM_WIKI_MODELS_DIR) and HOME/WIKI_HOME in the temp dir.
//  4. Pass/fail per file → bench-results/client/results.md (+ results.json, the engine
//     benchmark report retrieval-benchmark.json). Exits non-zero when tsc or a test fails.
//
// Options: --baseline (run the unpatched snapshot with its own engine instead: the "before"
// figures; no tsc gate, failures expected), --keep (leave the temp dir), --out <dir>,
// --qmd-migration (also migrate a QMD store written by the snapshot's own, unpatched code:
// builds QMD's better-sqlite3 from source with node-gyp and the Node 22 headers — a C compiler
// and several minutes — then runs examples/pi-llm-wiki/qmd-migration.test.ts in an unpatched
// copy; recorded as `qmdMigration` in the results).
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const repo = path.resolve(here, '..', '..')
const argv = process.argv.slice(2)
const BASELINE = argv.includes('--baseline')
const QMD_MIGRATION = argv.includes('--qmd-migration') && !BASELINE
const KEEP = argv.includes('--keep')
const outIdx = argv.indexOf('--out')
const outDir = path.resolve(outIdx >= 0 ? argv[outIdx + 1] : path.join(repo, 'bench-results', 'client'))

export const TEST_FILES = [
  'test/recall.test.ts',
  'test/agent-start-injection.test.ts',
  'test/mcp-parity.test.ts',
  'test/qmd-reindex-tool.test.ts',
  'test/qmd-indexing.test.ts',
  'test/qmd-indexing-recovery.test.ts',
  'test/retrieval-benchmark.test.ts',
  'test/memory-recall.test.ts',
]

const shared = process.env.LLM_WIKI_SHARED || path.join(repo, '..', 'shared')
const src = path.resolve(process.env.PI_LLM_WIKI_SRC || path.join(shared, 'upstream', 'pi-llm-wiki'))
if (!fs.existsSync(path.join(src, 'package.json'))) {
  console.error(`client snapshot not found at ${src} (set PI_LLM_WIKI_SRC or LLM_WIKI_SHARED): skipped`)
  process.exit(0)
}

const started = Date.now()
const work = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'pi-llm-wiki-client-')))
const log = (m) => console.log(`[test:client ${((Date.now() - started) / 1000).toFixed(0)}s] ${m}`)

function sh(cmd, args, opts = {}) {
  log(`$ ${cmd} ${args.join(' ')}${opts.cwd ? `   (in ${path.relative(work, opts.cwd) || '.'})` : ''}`)
  const r = spawnSync(cmd, args, { stdio: 'inherit', ...opts })
  if (r.error) throw r.error
  return r.status ?? 1
}

function must(cmd, args, opts) {
  const status = sh(cmd, args, opts)
  if (status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${status})`)
}

// The registry now and then answers an install with stale metadata (ETARGET for a version it
// lists a minute later: seen once in CI) or drops the connection: such an install is retried,
// asking for fresh metadata, before the run fails.
function mustInstall(args, opts, tries = 3) {
  for (let attempt = 1; ; attempt++) {
    const status = sh('npm', attempt === 1 ? args : [...args, '--prefer-online'], opts)
    if (status === 0) return
    if (attempt >= tries) throw new Error(`npm ${args.join(' ')} failed (${status}) ${tries} times`)
    log(`npm install failed (${status}); retrying in ${15 * attempt} s`)
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 15000 * attempt)
  }
}

function copyTree(from, to) {
  fs.cpSync(from, to, {
    recursive: true,
    filter: (p) => !/[\\/](node_modules|\.git|dist|tmp)$/.test(p),
  })
  // The shared snapshot is read-only; the copy must be writable.
  for (const entry of fs.readdirSync(to, { recursive: true, withFileTypes: true })) {
    const p = path.join(entry.parentPath ?? entry.path, entry.name)
    fs.chmodSync(p, entry.isDirectory() ? 0o755 : 0o644)
  }
  fs.chmodSync(to, 0o755)
}

/** This package as the client installs it: the published files plus the built addon. */
function stagePackage(dir) {
  const pkg = JSON.parse(fs.readFileSync(path.join(repo, 'package.json'), 'utf8'))
  fs.mkdirSync(dir, { recursive: true })
  const binaries = fs.readdirSync(repo).filter((f) => f.endsWith('.node'))
  if (binaries.length === 0) throw new Error('no built addon (*.node) in the repository: run npm run build first')
  for (const f of ['index.js', 'index.d.ts', 'qmd-indexing.js', 'qmd-indexing.d.ts', 'binding.js', ...binaries]) {
    fs.copyFileSync(path.join(repo, f), path.join(dir, f))
  }
  delete pkg.scripts
  delete pkg.devDependencies
  // `--install-links` packs the directory by its `files`: the locally built binary must be listed
  // (a published install gets it from the platform package instead).
  pkg.files = [...pkg.files, ...binaries]
  fs.writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`)
}

/** A Node ≥ 22 binary: the system one when recent enough, else node-<platform>-<arch>@22 from npm. */
function node22() {
  if (Number(process.versions.node.split('.')[0]) >= 22) return process.execPath
  const dir = path.join(work, 'node22')
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, 'package.json'), '{"name":"node22","private":true}\n')
  mustInstall(['install', '--no-audit', '--no-fund', '--ignore-scripts', `node-${process.platform}-${process.arch}@22`], { cwd: dir })
  const bin = path.join(dir, 'node_modules', `node-${process.platform}-${process.arch}`, 'bin', process.platform === 'win32' ? 'node.exe' : 'node')
  if (!fs.existsSync(bin)) throw new Error(`Node 22 binary not found at ${bin}`)
  return bin
}

function modelEnv() {
  const models = process.env.LLM_WIKI_MODELS_DIR || path.join(repo, '.models')
  const env = {}
  if (fs.existsSync(models)) {
    env.LLM_WIKI_MODELS_DIR = fs.realpathSync(models)
    const rt = path.join(models, 'runtime', 'runtime.json')
    if (!process.env.ORT_DYLIB_PATH && fs.existsSync(rt)) {
      const lib = JSON.parse(fs.readFileSync(rt, 'utf8')).path
      const local = path.join(models, 'runtime', path.basename(lib))
      env.ORT_DYLIB_PATH = fs.existsSync(local) ? fs.realpathSync(local) : lib
    }
  }
  return env
}

function perFile(report, clientDir) {
  const rows = []
  for (const file of TEST_FILES) {
    const abs = path.join(clientDir, file)
    const suite = report.testResults.find((r) => path.resolve(r.name) === abs)
    const tests = suite ? suite.assertionResults : []
    const count = (status) => tests.filter((t) => t.status === status).length
    rows.push({
      file,
      passed: count('passed'),
      failed: count('failed'),
      skipped: count('skipped') + count('pending') + count('todo'),
      suiteError: suite && suite.status === 'failed' && tests.length === 0 ? suite.message || 'suite failed' : undefined,
      failures: tests.filter((t) => t.status === 'failed').map((t) => t.fullName || t.title),
    })
  }
  return rows
}

function writeResults(result) {
  fs.mkdirSync(outDir, { recursive: true })
  const name = BASELINE ? 'baseline' : 'results'
  fs.writeFileSync(path.join(outDir, `${name}.json`), `${JSON.stringify(result, null, 2)}\n`)
  const lines = [
    `# pi-llm-wiki client tests ${BASELINE ? 'as shipped (its own engine)' : 'on llm-wiki-retrieval (patched)'}`,
    '',
    `Command: \`node examples/pi-llm-wiki/run.mjs${argv.length ? ` ${argv.join(' ')}` : ''}\` (\`npm run test:client\`). Node ${result.node}, ` +
      `client snapshot ${result.snapshot}, ${result.date}. tsc --noEmit: ${result.tsc}.`,
    '',
    '| file | passed | failed | skipped |',
    '|---|---:|---:|---:|',
    ...result.files.map((f) => `| ${f.file} | ${f.passed} | ${f.failed}${f.suiteError ? ' (suite error)' : ''} | ${f.skipped} |`),
    `| **total** | **${result.total.passed}** | **${result.total.failed}** | ${result.total.skipped} |`,
    '',
    ...(result.qmdMigration ? [`Migration of a QMD store written by the unpatched snapshot's own code (qmd-migration.test.ts): ${result.qmdMigration}.`, ''] : []),
  ]
  const failing = result.files.filter((f) => f.failures.length > 0 || f.suiteError)
  if (failing.length > 0) {
    lines.push('Failures:', '')
    for (const f of failing) {
      if (f.suiteError) lines.push(`- ${f.file}: ${String(f.suiteError).split('\n')[0]}`)
      for (const t of f.failures) lines.push(`- ${f.file}: ${t}`)
    }
    lines.push('')
  }
  if (result.benchmark) {
    const m = result.benchmark.metrics.all
    const b = result.benchmark.baseline.all
    lines.push(
      `Retrieval benchmark (client fixture, all ${m.queryCount} queries; modes ${JSON.stringify(result.benchmark.modes)}, vectors ${result.benchmark.vectors}):`,
      '',
      '| metric | heuristic baseline (committed) | llm-wiki-retrieval |',
      '|---|---:|---:|',
      ...['ndcg10', 'ndcg5', 'mrr', 'candidateRecall20', 'canonicalAt3', 'evidenceRecall20', 'contradictionCoverage', 'autoFalsePositiveRate'].map(
        (k) => `| ${k} | ${b[k].toFixed(3)} | ${m[k].toFixed(3)} |`,
      ),
      '',
    )
  }
  fs.writeFileSync(path.join(outDir, `${name}.md`), lines.join('\n'))
  log(`results: ${path.join(outDir, `${name}.md`)}`)
}

let exitCode = 1
try {
  const client = path.join(work, 'client')
  copyTree(src, client)
  const pkgPath = path.join(client, 'package.json')
  const clientPkg = JSON.parse(fs.readFileSync(pkgPath, 'utf8'))
  if (!BASELINE) {
    must('git', ['apply', '--whitespace=nowarn', path.join(here, 'client.patch')], { cwd: client })
    stagePackage(path.join(work, 'llm-wiki-retrieval'))
    clientPkg.dependencies['llm-wiki-retrieval'] = 'file:../llm-wiki-retrieval'
    fs.writeFileSync(pkgPath, `${JSON.stringify(clientPkg, null, 2)}\n`)
  }
  // No native builds (the client's own QMD engine needs them; this engine does not) and no
  // network beyond the npm registry.
  mustInstall(['install', '--ignore-scripts', '--no-audit', '--no-fund', '--install-links'], { cwd: client })
  const node = node22()
  const nodeVersion = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim()
  const home = path.join(work, 'home')
  fs.mkdirSync(home, { recursive: true })
  const env = { ...process.env, ...modelEnv(), HOME: home, WIKI_HOME: '', CI: 'true' }
  delete env.WIKI_HOME
  const tscStatus = sh(node, [path.join(client, 'node_modules', 'typescript', 'bin', 'tsc'), '--noEmit'], { cwd: client, env })
  const reportFile = path.join(work, 'vitest.json')
  const benchFile = path.join(work, 'retrieval-benchmark.json')
  sh(
    node,
    [path.join(client, 'node_modules', 'vitest', 'vitest.mjs'), 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${reportFile}`, ...TEST_FILES],
    { cwd: client, env: { ...env, RETRIEVAL_ENGINE_REPORT: benchFile } },
  )
  let qmdMigration
  if (QMD_MIGRATION) {
    // The snapshot's own QMD engine needs its native SQLite module: build it for Node 22.
    const nodeDir = path.dirname(path.dirname(node))
    const built = sh('npm', ['rebuild', 'better-sqlite3', `--nodedir=${nodeDir}`], {
      cwd: client,
      env: { ...process.env, PATH: `${path.dirname(node)}${path.delimiter}${process.env.PATH}`, npm_config_build_from_source: 'true' },
    })
    const base = path.join(work, 'unpatched')
    copyTree(src, base)
    fs.symlinkSync(path.join(client, 'node_modules'), path.join(base, 'node_modules'), 'dir')
    fs.copyFileSync(path.join(here, 'qmd-migration.test.ts'), path.join(base, 'test', 'qmd-migration.test.ts'))
    const status =
      built === 0 ? sh(node, [path.join(client, 'node_modules', 'vitest', 'vitest.mjs'), 'run', 'test/qmd-migration.test.ts'], { cwd: base, env }) : 1
    qmdMigration = built !== 0 ? 'better-sqlite3 could not be built' : status === 0 ? 'pass' : 'fail'
  }
  const report = fs.existsSync(reportFile) ? JSON.parse(fs.readFileSync(reportFile, 'utf8')) : { testResults: [] }
  const files = perFile(report, client)
  const total = files.reduce((t, f) => ({ passed: t.passed + f.passed, failed: t.failed + f.failed, skipped: t.skipped + f.skipped }), { passed: 0, failed: 0, skipped: 0 })
  const result = {
    mode: BASELINE ? 'baseline' : 'patched',
    date: new Date().toISOString(),
    node: nodeVersion,
    snapshot: clientPkg.version,
    tsc: tscStatus === 0 ? 'pass' : 'fail',
    files,
    total,
    benchmark: fs.existsSync(benchFile) ? JSON.parse(fs.readFileSync(benchFile, 'utf8')) : undefined,
    qmdMigration,
    seconds: Math.round((Date.now() - started) / 1000),
  }
  writeResults(result)
  console.log(JSON.stringify({ tsc: result.tsc, total, files: files.map((f) => `${f.file} ${f.passed}/${f.failed}`) }, null, 2))
  const suiteErrors = files.some((f) => f.suiteError)
  exitCode = BASELINE ? 0 : tscStatus === 0 && total.failed === 0 && !suiteErrors && total.passed > 0 && qmdMigration !== 'fail' ? 0 : 1
} catch (err) {
  console.error(err)
  exitCode = 1
} finally {
  if (KEEP) log(`kept ${work}`)
  else fs.rmSync(work, { recursive: true, force: true })
}
process.exit(exitCode)
