// `npm run test:client`: the real client, pi-llm-wiki, adopts this engine, proven by its whole
// test suite.
//
//  1. Copy the client snapshot ($PI_LLM_WIKI_SRC, else $LLM_WIKI_SHARED/upstream/pi-llm-wiki, else
//     ../shared/upstream/pi-llm-wiki) into a temp dir and apply the patch series
//     examples/pi-llm-wiki/patches/0001-…, 0002-…, … in order with `git apply` (patches/README.md
//     says what each changes; docs/INTEGRATION.md lists every changed, retired and added test).
//     To change the series: copy the snapshot, `git init` + commit it, `git am` the series, edit
//     and commit (amend the commit the change belongs to), then
//     `git format-patch --no-signature --zero-commit -o <repo>/examples/pi-llm-wiki/patches <snapshot>..`.
//  2. Stage this package (index.js, index.d.ts, qmd-indexing.*, binding.js, the built addon) as
//     the client's `llm-wiki-retrieval` dependency, install with `npm install --ignore-scripts`
//     (the npm registry only), and fetch Node 22 (`node-<platform>-<arch>@22`) when the system
//     Node is older (the client's `engines`) and pnpm (the client's `packageManager`, which its
//     mcp-package test runs) from npm.
//  3. `tsc --noEmit` and `vitest run` — every test file of the client — under Node 22, with the
//     repository's models (.models, or $LLM_WIKI_MODELS_DIR) and HOME in the temp dir. On Linux
//     vitest runs under a small Python subreaper that reaps orphaned processes (mcp-exec's
//     process-group test checks that a killed grandchild is gone; where PID 1 does not reap,
//     as in some containers, the zombie would otherwise still answer `kill(pid, 0)`). The client
//     test that injects a fault through the engine's test hooks runs when the built addon has
//     them (`LLM_WIKI_TEST_HOOKS=1`; `npm test` builds it so); without them it is skipped with
//     a logged line, except on CI (`CI=true`), where the run fails instead.
//  4. Pass/fail per file → bench-results/client/results.md (+ results.json, the engine
//     benchmark report retrieval-benchmark.json). Exits non-zero when tsc or a test fails.
//
// Options: --baseline (also run the unpatched snapshot's whole suite with its own engine and
// dependencies, installed with --ignore-scripts: bench-results/client/baseline.md; failures there
// are expected and do not fail the run), --keep (leave the temp dir), --out <dir>,
// --qmd-migration (migrate a QMD store written by the snapshot's own, unpatched code: builds
// QMD's better-sqlite3 from source with node-gyp and the Node 22 headers — a C compiler and
// several minutes — in an unpatched copy, then runs examples/pi-llm-wiki/qmd-migration.test.ts
// there; recorded as `qmdMigration` in the results).
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const repo = path.resolve(here, '..', '..')
const argv = process.argv.slice(2)
const BASELINE = argv.includes('--baseline')
const QMD_MIGRATION = argv.includes('--qmd-migration')
const KEEP = argv.includes('--keep')
const outIdx = argv.indexOf('--out')
const outDir = path.resolve(outIdx >= 0 ? argv[outIdx + 1] : path.join(repo, 'bench-results', 'client'))

/** The patch series, applied in order (file names sort by their number). */
export const PATCHES = fs
  .readdirSync(path.join(here, 'patches'))
  .filter((f) => /^\d{4}-.*\.patch$/.test(f))
  .sort()

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
  const shown = args.map((a) => (a.includes('\n') ? '<script>' : a))
  log(`$ ${cmd} ${shown.join(' ')}${opts.cwd ? `   (in ${path.relative(work, opts.cwd) || '.'})` : ''}`)
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

/**
 * Whether the built addon has the engine's test hooks (cargo feature `test-hooks`, which
 * `npm test` builds with and published builds lack): a recall whose query starts with
 * `$LLM_WIKI_TEST_PANIC` then rejects with `internal_panic`. Probed in a child process.
 */
function addonHasTestHooks() {
  const probe = `
process.env.LLM_WIKI_TEST_PANIC = 'test-hooks-probe:'
const policy = { includePersonal: false, minScore: 0, maxPerVault: 1, maxResults: 1 }
require(${JSON.stringify(path.join(repo, 'index.js'))})
  .recallWiki({ root: ${JSON.stringify(path.join(work, 'no-such-vault'))} }, 'test-hooks-probe: x', { policy, mode: 'lexical' })
  .then(() => process.exit(3), (e) => process.exit(e.code === 'internal_panic' ? 0 : 3))`
  return spawnSync(process.execPath, ['-e', probe], { stdio: 'ignore' }).status === 0
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

/** pnpm (the client's `packageManager`) from npm, for the tests that run it. */
function pnpmBin(clientPkg) {
  const dir = path.join(work, 'pnpm')
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, 'package.json'), '{"name":"pnpm-tool","private":true}\n')
  const spec = /^pnpm@/.test(clientPkg.packageManager || '') ? clientPkg.packageManager : 'pnpm@9'
  mustInstall(['install', '--no-audit', '--no-fund', '--ignore-scripts', spec], { cwd: dir })
  return path.join(dir, 'node_modules', '.bin')
}

// A subreaper around vitest (Linux, Python 3): orphans of the tests are reparented to it and
// reaped, so a killed process is gone and not a zombie where PID 1 does not reap.
const REAPER = `
import ctypes, os, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
child = os.fork()
if child == 0:
    os.execv(sys.argv[1], sys.argv[1:])
status = 1
while True:
    try:
        pid, st = os.wait()
    except ChildProcessError:
        break
    if pid == child:
        status = os.waitstatus_to_exitcode(st)
sys.exit(status if status >= 0 else 128 - status)
`

function withReaper(cmd, args) {
  if (process.platform !== 'linux') return [cmd, args]
  const probe = spawnSync('python3', ['-c', 'import ctypes, os; os.waitstatus_to_exitcode'], { stdio: 'ignore' })
  return probe.status === 0 ? ['python3', ['-c', REAPER, cmd, ...args]] : [cmd, args]
}

function perFile(report, clientDir) {
  const rows = []
  for (const suite of report.testResults) {
    const file = path.relative(clientDir, path.resolve(suite.name)).split(path.sep).join('/')
    const tests = suite.assertionResults
    const count = (status) => tests.filter((t) => t.status === status).length
    rows.push({
      file,
      passed: count('passed'),
      failed: count('failed'),
      skipped: count('skipped') + count('pending') + count('todo'),
      suiteError: suite.status === 'failed' && tests.length === 0 ? suite.message || 'suite failed' : undefined,
      failures: tests.filter((t) => t.status === 'failed').map((t) => t.fullName || t.title),
    })
  }
  return rows.sort((x, y) => (x.file < y.file ? -1 : x.file > y.file ? 1 : 0))
}

function writeResults(name, result) {
  fs.mkdirSync(outDir, { recursive: true })
  fs.writeFileSync(path.join(outDir, `${name}.json`), `${JSON.stringify(result, null, 2)}\n`)
  const baseline = result.mode === 'baseline'
  const lines = [
    `# pi-llm-wiki client tests ${baseline ? 'as shipped (its own engine)' : 'on llm-wiki-retrieval (patched)'}`,
    '',
    `Command: \`node examples/pi-llm-wiki/run.mjs${argv.length ? ` ${argv.join(' ')}` : ''}\` (\`npm run test:client\`). Node ${result.node}, ` +
      `client snapshot ${result.snapshot}, ${result.date}. ${baseline ? '' : `Patches: ${PATCHES.length}. `}The whole suite: ${result.files.length} test files. tsc --noEmit: ${result.tsc}. ${baseline ? '' : `Engine test hooks: ${result.testHooks ? 'yes' : 'no (the test that needs them skipped)'}. `}${result.seconds} s.`,
    '',
    '| file | passed | failed | skipped |',
    '|---|---:|---:|---:|',
    ...result.files.map((f) => `| ${f.file} | ${f.passed} | ${f.failed}${f.suiteError ? ' (suite error)' : ''} | ${f.skipped} |`),
    `| **total (${result.files.length} files)** | **${result.total.passed}** | **${result.total.failed}** | ${result.total.skipped} |`,
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

/** tsc + the whole vitest suite in `dir`; the per-file result. */
function runSuite(mode, dir, node, env, extra = {}) {
  const t0 = Date.now()
  const clientPkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'))
  const tscStatus = sh(node, [path.join(dir, 'node_modules', 'typescript', 'bin', 'tsc'), '--noEmit'], { cwd: dir, env })
  const reportFile = path.join(work, `vitest-${mode}.json`)
  const [cmd, args] = withReaper(node, [
    path.join(dir, 'node_modules', 'vitest', 'vitest.mjs'),
    'run',
    '--reporter=dot',
    '--reporter=json',
    `--outputFile.json=${reportFile}`,
  ])
  sh(cmd, args, { cwd: dir, env })
  const report = fs.existsSync(reportFile) ? JSON.parse(fs.readFileSync(reportFile, 'utf8')) : { testResults: [] }
  const files = perFile(report, dir)
  const total = files.reduce((t, f) => ({ passed: t.passed + f.passed, failed: t.failed + f.failed, skipped: t.skipped + f.skipped }), { passed: 0, failed: 0, skipped: 0 })
  return {
    mode,
    date: new Date().toISOString(),
    node: spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim(),
    snapshot: clientPkg.version,
    tsc: tscStatus === 0 ? 'pass' : 'fail',
    files,
    total,
    seconds: Math.round((Date.now() - t0) / 1000),
    ...extra,
  }
}

function install(dir) {
  // No native builds (the client's own QMD engine needs them; this engine does not) and no
  // network beyond the npm registry.
  mustInstall(['install', '--ignore-scripts', '--no-audit', '--no-fund', '--install-links'], { cwd: dir })
}

function addEngineDependency(dir) {
  const pkgPath = path.join(dir, 'package.json')
  const pkg = JSON.parse(fs.readFileSync(pkgPath, 'utf8'))
  pkg.dependencies['llm-wiki-retrieval'] = 'file:../llm-wiki-retrieval'
  fs.writeFileSync(pkgPath, `${JSON.stringify(pkg, null, 2)}\n`)
}

let exitCode = 1
try {
  const client = path.join(work, 'client')
  copyTree(src, client)
  const snapshotPkg = JSON.parse(fs.readFileSync(path.join(client, 'package.json'), 'utf8'))
  for (const patch of PATCHES) must('git', ['apply', '--whitespace=nowarn', path.join(here, 'patches', patch)], { cwd: client })
  stagePackage(path.join(work, 'llm-wiki-retrieval'))
  addEngineDependency(client)
  install(client)
  const node = node22()
  const pnpm = pnpmBin(snapshotPkg)
  const home = path.join(work, 'home')
  fs.mkdirSync(home, { recursive: true })
  const env = {
    ...process.env,
    ...modelEnv(),
    HOME: home,
    CI: 'true',
    PATH: [path.dirname(node), pnpm, process.env.PATH].join(path.delimiter),
  }
  delete env.WIKI_HOME
  // The client tests that inject a fault through the engine's test hooks (qmd-indexing.test.ts:
  // staged-count validation) run when the addon has them; CI builds it so (npm test runs
  // first) and requires them, elsewhere they are skipped with this line.
  const testHooks = addonHasTestHooks()
  env.LLM_WIKI_TEST_HOOKS = testHooks ? '1' : '0'
  if (!testHooks) {
    const why = 'the built addon has no test hooks (cargo feature test-hooks: npm test builds it so)'
    if (process.env.CI === 'true' || process.env.LLM_WIKI_REQUIRE_TEST_HOOKS === '1') throw new Error(`${why}; CI requires them`)
    log(`${why}: the client test that needs them (qmd-indexing: staged-count validation) is skipped`)
  }
  const benchFile = path.join(work, 'retrieval-benchmark.json')
  const result = runSuite('patched', client, node, { ...env, RETRIEVAL_ENGINE_REPORT: benchFile }, { testHooks })
  if (fs.existsSync(benchFile)) result.benchmark = JSON.parse(fs.readFileSync(benchFile, 'utf8'))

  let baseline
  if (BASELINE || QMD_MIGRATION) {
    const base = path.join(work, 'unpatched')
    copyTree(src, base)
    if (QMD_MIGRATION) addEngineDependency(base)
    install(base)
    if (BASELINE) {
      fs.rmSync(path.join(work, 'home'), { recursive: true, force: true })
      fs.mkdirSync(home, { recursive: true })
      baseline = runSuite('baseline', base, node, env)
    }
    if (QMD_MIGRATION) {
      // The snapshot's own QMD engine needs its native SQLite module: build it for Node 22.
      const nodeDir = path.dirname(path.dirname(node))
      const built = sh('npm', ['rebuild', 'better-sqlite3', `--nodedir=${nodeDir}`], {
        cwd: base,
        env: { ...process.env, PATH: `${path.dirname(node)}${path.delimiter}${process.env.PATH}`, npm_config_build_from_source: 'true' },
      })
      fs.copyFileSync(path.join(here, 'qmd-migration.test.ts'), path.join(base, 'test', 'qmd-migration.test.ts'))
      const status =
        built === 0 ? sh(node, [path.join(base, 'node_modules', 'vitest', 'vitest.mjs'), 'run', 'test/qmd-migration.test.ts'], { cwd: base, env }) : 1
      result.qmdMigration = built !== 0 ? 'better-sqlite3 could not be built' : status === 0 ? 'pass' : 'fail'
    }
  }
  writeResults('results', result)
  if (baseline) writeResults('baseline', baseline)
  const summary = (r) => ({ tsc: r.tsc, files: r.files.length, total: r.total, failing: r.files.filter((f) => f.failed || f.suiteError).map((f) => f.file) })
  console.log(JSON.stringify({ patched: summary(result), ...(baseline ? { baseline: summary(baseline) } : {}) }, null, 2))
  const suiteErrors = result.files.some((f) => f.suiteError)
  exitCode = result.tsc === 'pass' && result.total.failed === 0 && !suiteErrors && result.total.passed > 0 && result.qmdMigration !== 'fail' ? 0 : 1
} catch (err) {
  console.error(err)
  exitCode = 1
} finally {
  if (KEEP) log(`kept ${work}`)
  else fs.rmSync(work, { recursive: true, force: true })
}
process.exit(exitCode)
