// `npm run test:pack`: rehearse the npm distribution on this machine, then install the result
// the way a user would and use it from TypeScript.
//
//  0. Build the addon as it is published (`napi build`, no cargo features: no test hooks) into
//     the temp dir; its generated index.d.ts / binding.js must equal the committed ones (which
//     `npm test` generated from the test-hooks build).
//  1. napi publish steps, in a temporary copy of the package (never publishes):
//     `napi create-npm-dirs --dry-run` (repo) and for real (copy), `napi artifacts` with the
//     local binary staged as artifacts/bindings-<triple>/ (the other targets get placeholder
//     files, since only CI builds them), `napi prepublish -t npm --dry-run --no-gh-release`.
//  2. `npm pack` of the root package and of the local platform package (npm/<platform>/).
//  3. A fresh consumer project, no Rust toolchain on PATH: install both tarballs + typescript,
//     `tsc --noEmit` (strict) against the shipped index.d.ts, compile the sources in
//     scripts/pack-test/ (consumer.ts, named-imports.ts, tsconfig.json), run on a copy of the
//     bundled example vault — under the system Node and under Node 22 (from the npm package
//     node-<platform>-<arch>@22, extracted into the temp dir).
//       a. lexical engine with no ONNX Runtime anywhere (reindex warns vectors_unavailable), with
//          LLM_WIKI_CRASH_AT and LLM_WIKI_TEST_PANIC set: the shipped binary has no hooks, so
//          the first index passes its crash point and a marked recall resolves;
//       b. `onnxruntime-node@1.30.0` installed with ONNXRUNTIME_NODE_INSTALL=skip, the int8
//          embedder copied into a model root given to configure(): the runtime must be the
//          package's library, vectors are embedded, hybrid recall reports mode 'hybrid'.
//  4. Installed sizes (du -sb).
//
// Options: --keep (leave the temp dir), --skip-node22, --no-dense. Models come from
// LLM_WIKI_MODELS_DIR or <repo>/.models (python3 scripts/fetch_models.py). Exits non-zero on
// any failure.
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { ensureBuilt, ensureNodeModules, root } from './setup.mjs'

const argv = new Set(process.argv.slice(2))
const KEEP = argv.has('--keep')
const SKIP_NODE22 = argv.has('--skip-node22')
const DENSE = !argv.has('--no-dense')
/** Fail (instead of warn) when ESM named imports of the package do not work. */
const STRICT_ESM = process.env.PACK_TEST_STRICT_ESM !== '0'

const ONNXRUNTIME_NODE = 'onnxruntime-node@1.30.0'
const TYPESCRIPT = 'typescript@5.9.3'
const TYPES_NODE = '@types/node@20'
const NODE22 = `node-${process.platform}-${process.arch}@22`

const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
const BINARY = pkg.napi.binaryName
const LOCAL = localTarget()

const started = Date.now()
const timings = []
const report = { napi: {}, tarballs: {}, runs: [], sizes: {}, warnings: [] }

function localTarget() {
  const table = {
    'linux-x64': ['x86_64-unknown-linux-gnu', 'linux-x64-gnu'],
    'linux-arm64': ['aarch64-unknown-linux-gnu', 'linux-arm64-gnu'],
    'darwin-x64': ['x86_64-apple-darwin', 'darwin-x64'],
    'darwin-arm64': ['aarch64-apple-darwin', 'darwin-arm64'],
    'win32-x64': ['x86_64-pc-windows-msvc', 'win32-x64-msvc'],
  }
  const hit = table[`${process.platform}-${process.arch}`]
  if (!hit) throw new Error(`no napi target for ${process.platform}-${process.arch}`)
  return { triple: hit[0], abi: hit[1] }
}

function log(msg) {
  console.log(msg)
}

async function step(name, fn) {
  const t = Date.now()
  log(`\n=== ${name}`)
  const out = await fn()
  const ms = Date.now() - t
  timings.push([name, ms])
  log(`--- ${name}: ${(ms / 1000).toFixed(1)} s`)
  return out
}

/** Run a command; throws with its output when it fails. Returns stdout (and stderr when asked). */
function sh(cmd, args, { cwd = root, env = process.env, quiet = false, allowFail = false } = {}) {
  if (!quiet) log(`$ ${[cmd, ...args].join(' ')}${cwd !== root ? `   (in ${cwd})` : ''}`)
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  if (r.error) throw r.error
  if (r.status !== 0 && !allowFail) {
    throw new Error(`${cmd} ${args.join(' ')} exited with ${r.status ?? r.signal}\n${r.stdout}\n${r.stderr}`)
  }
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

function indent(text) {
  return text
    .trimEnd()
    .split('\n')
    .map((l) => `    ${l}`)
    .join('\n')
}

function sha256(file) {
  return createHash('sha256').update(fs.readFileSync(file)).digest('hex')
}

function duBytes(p) {
  const out = sh('du', ['-sb', p], { quiet: true }).stdout
  return Number(out.split(/\s+/)[0])
}

function mb(bytes) {
  return `${(bytes / 1e6).toFixed(1)} MB`
}

/** PATH without any directory that provides cargo, rustc or rustup (and no ~/.cargo/bin). */
function pathWithoutRust() {
  const dirs = (process.env.PATH || '').split(path.delimiter).filter(Boolean)
  const tools = ['cargo', 'rustc', 'rustup'].flatMap((t) => (process.platform === 'win32' ? [`${t}.exe`] : [t]))
  return dirs
    .filter((d) => !/[\\/]\.(cargo|rustup)([\\/]|$)/.test(d))
    .filter((d) => !tools.some((t) => fs.existsSync(path.join(d, t))))
    .join(path.delimiter)
}

// ---------------------------------------------------------------------------------------------

ensureNodeModules()
const modelRoot = process.env.LLM_WIKI_MODELS_DIR || path.join(root, '.models')
const int8 = path.join(modelRoot, 'all-MiniLM-L6-v2-int8')
if (DENSE && !fs.existsSync(path.join(int8, 'manifest.json'))) {
  throw new Error(`embedder ${int8} is missing: run python3 scripts/fetch_models.py (or pass --no-dense)`)
}

const work = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'llm-wiki-pack-')))
const napiBin = path.join(root, 'node_modules', '.bin', process.platform === 'win32' ? 'napi.cmd' : 'napi')
const published = path.join(work, 'published-build')
const localNode = path.join(published, `${BINARY}.${LOCAL.abi}.node`)
let failed = false

try {
  // 0. the published build ---------------------------------------------------------------------
  await step('napi build as published (profile ci, no cargo features: no test hooks)', () => {
    ensureBuilt({ profile: 'ci', outputDir: published })
    if (!fs.existsSync(localNode)) throw new Error(`built binary ${localNode} is missing`)
    for (const f of ['index.d.ts', 'binding.js']) {
      if (fs.readFileSync(path.join(published, f), 'utf8') !== fs.readFileSync(path.join(root, f), 'utf8')) {
        throw new Error(`${f} generated without the test-hooks feature differs from the committed one`)
      }
    }
    log('    index.d.ts and binding.js are identical to the committed (test-hooks build) ones')
  })

  // 1. napi distribution steps ----------------------------------------------------------------
  await step('napi create-npm-dirs --dry-run (repository, nothing written)', () => {
    const r = sh(napiBin, ['create-npm-dirs', '--dry-run'], { env: { ...process.env, DEBUG: 'napi:*' } })
    report.napi.createNpmDirsDryRun = (r.stdout + r.stderr).trim()
    log(indent(report.napi.createNpmDirsDryRun))
    if (fs.existsSync(path.join(root, 'npm'))) throw new Error('dry run created npm/ in the repository')
  })

  const stage = path.join(work, 'stage')
  await step('napi create-npm-dirs (temporary copy of the package)', () => {
    fs.mkdirSync(stage)
    for (const f of ['package.json', 'index.js', 'index.d.ts', 'binding.js']) fs.copyFileSync(path.join(root, f), path.join(stage, f))
    sh(napiBin, ['create-npm-dirs', '--cwd', stage])
    const dirs = fs.readdirSync(path.join(stage, 'npm')).sort()
    log(`    npm/: ${dirs.join(', ')}`)
    const expected = ['darwin-arm64', 'darwin-x64', 'linux-arm64-gnu', 'linux-x64-gnu', 'win32-x64-msvc']
    if (dirs.join() !== expected.join()) throw new Error(`unexpected platform dirs ${dirs.join()}`)
    const local = fs.readFileSync(path.join(stage, 'npm', LOCAL.abi, 'package.json'), 'utf8')
    report.napi.localPackageJson = JSON.parse(local)
    log(indent(`npm/${LOCAL.abi}/package.json:\n${local}`))
  })

  await step('napi artifacts (local binary + placeholders for the CI-only targets)', () => {
    for (const target of pkg.napi.targets) {
      const abi = {
        'x86_64-unknown-linux-gnu': 'linux-x64-gnu',
        'aarch64-unknown-linux-gnu': 'linux-arm64-gnu',
        'x86_64-apple-darwin': 'darwin-x64',
        'aarch64-apple-darwin': 'darwin-arm64',
        'x86_64-pc-windows-msvc': 'win32-x64-msvc',
      }[target]
      const dir = path.join(stage, 'artifacts', `bindings-${target}`)
      fs.mkdirSync(dir, { recursive: true })
      const dest = path.join(dir, `${BINARY}.${abi}.node`)
      if (target === LOCAL.triple) fs.copyFileSync(localNode, dest)
      else fs.writeFileSync(dest, `placeholder for ${target}: built by the release workflow, not here\n`)
    }
    const r = sh(napiBin, ['artifacts', '--cwd', stage], { env: { ...process.env, DEBUG: 'napi:*' } })
    report.napi.artifacts = (r.stdout + r.stderr).trim()
    log(indent(report.napi.artifacts))
    const moved = path.join(stage, 'npm', LOCAL.abi, `${BINARY}.${LOCAL.abi}.node`)
    if (!fs.existsSync(moved) || sha256(moved) !== sha256(localNode)) throw new Error(`napi artifacts did not place ${moved}`)
  })

  await step('napi prepublish -t npm --dry-run --no-gh-release', () => {
    const before = fs.readFileSync(path.join(stage, 'package.json'), 'utf8')
    const r = sh(napiBin, ['prepublish', '-t', 'npm', '--dry-run', '--no-gh-release', '--cwd', stage], {
      env: { ...process.env, DEBUG: 'napi:*', GITHUB_REPOSITORY: '', GITHUB_TOKEN: '' },
    })
    report.napi.prepublishDryRun = (r.stdout + r.stderr).trim()
    log(indent(report.napi.prepublishDryRun || '(no output)'))
    if (fs.readFileSync(path.join(stage, 'package.json'), 'utf8') !== before) throw new Error('dry run changed package.json')
  })

  await step('napi prepublish -t npm --skip-optional-publish --no-gh-release (copy: writes optionalDependencies, publishes nothing)', () => {
    sh(napiBin, ['prepublish', '-t', 'npm', '--skip-optional-publish', '--no-gh-release', '--cwd', stage], {
      env: { ...process.env, GITHUB_REPOSITORY: '', GITHUB_TOKEN: '', npm_config_dry_run: 'true' },
    })
    const published = JSON.parse(fs.readFileSync(path.join(stage, 'package.json'), 'utf8'))
    report.napi.rootOptionalDependencies = published.optionalDependencies
    log(indent(`root package.json as prepublishOnly leaves it for \`npm publish\`:\n"optionalDependencies": ${JSON.stringify(published.optionalDependencies, null, 2)}`))
    const expected = ['darwin-arm64', 'darwin-x64', 'linux-arm64-gnu', 'linux-x64-gnu', 'win32-x64-msvc'].map((abi) => `${pkg.name}-${abi}`)
    const got = Object.keys(published.optionalDependencies || {}).sort()
    if (got.join() !== expected.join()) throw new Error(`unexpected optionalDependencies ${got.join()}`)
    if (Object.values(published.optionalDependencies).some((v) => v !== pkg.version)) throw new Error('optionalDependencies not pinned to the package version')
  })

  // 2. tarballs -------------------------------------------------------------------------------
  const tarballs = path.join(work, 'tarballs')
  fs.mkdirSync(tarballs)
  const packed = await step('npm pack (root package + local platform package)', () => {
    const pack = (cwd) => {
      const r = sh('npm', ['pack', '--json', '--pack-destination', tarballs], { cwd })
      const [info] = JSON.parse(r.stdout)
      return info
    }
    const rootInfo = pack(root)
    const platformInfo = pack(path.join(stage, 'npm', LOCAL.abi))
    const files = rootInfo.files.map((f) => f.path)
    for (const must of ['index.js', 'index.d.ts', 'binding.js', 'bin/llm-wiki-retrieval.js', 'examples/vault/.llm-wiki/config.json']) {
      if (!files.includes(must)) throw new Error(`root tarball lacks ${must}`)
    }
    if (files.some((f) => f.endsWith('.node'))) throw new Error('root tarball contains a .node binary')
    if (!platformInfo.files.some((f) => f.path === `${BINARY}.${LOCAL.abi}.node`)) throw new Error('platform tarball lacks the binary')
    for (const info of [rootInfo, platformInfo]) {
      report.tarballs[info.name] = { file: info.filename, packed: info.size, unpacked: info.unpackedSize, files: info.entryCount }
      log(`    ${info.filename}: ${mb(info.size)} packed, ${mb(info.unpackedSize)} unpacked, ${info.entryCount} files`)
    }
    return { root: path.join(tarballs, rootInfo.filename), platform: path.join(tarballs, platformInfo.filename) }
  })

  // 3. consumer project -----------------------------------------------------------------------
  const noRustPath = pathWithoutRust()
  const probe = sh('sh', ['-c', 'command -v cargo || command -v rustc || command -v rustup'], {
    env: { ...process.env, PATH: noRustPath },
    quiet: true,
    allowFail: true,
  })
  if (probe.status === 0) throw new Error(`a Rust toolchain is still on the consumer PATH: ${probe.stdout}`)
  const installEnv = { ...process.env, PATH: noRustPath, npm_config_audit: 'false', npm_config_fund: 'false' }

  const node22 = SKIP_NODE22
    ? null
    : await step(`Node 22 from npm (${NODE22}, extracted into the temp dir)`, () => {
        const dir = path.join(work, 'node22')
        fs.mkdirSync(dir)
        const r = sh('npm', ['pack', NODE22, '--json', '--pack-destination', dir], { env: installEnv })
        const [info] = JSON.parse(r.stdout)
        sh('tar', ['xzf', path.join(dir, info.filename), '-C', dir])
        const bin = path.join(dir, 'package', 'bin', process.platform === 'win32' ? 'node.exe' : 'node')
        const version = sh(bin, ['--version'], { quiet: true }).stdout.trim()
        if (!version.startsWith('v22.')) throw new Error(`${bin} is ${version}`)
        log(`    ${bin}: ${version}`)
        return bin
      })
  const nodes = [['system', process.execPath], ...(node22 ? [['22', node22]] : [])]

  const consumer = path.join(work, 'consumer')
  await step(`consumer project: npm install both tarballs + ${TYPESCRIPT} (no Rust on PATH)`, () => {
    fs.mkdirSync(path.join(consumer, 'src'), { recursive: true })
    fs.writeFileSync(
      path.join(consumer, 'package.json'),
      JSON.stringify({ name: 'llm-wiki-pack-consumer', version: '1.0.0', private: true, type: 'module' }, null, 2),
    )
    const sources = path.join(root, 'scripts', 'pack-test')
    fs.copyFileSync(path.join(sources, 'tsconfig.json'), path.join(consumer, 'tsconfig.json'))
    for (const f of ['consumer.ts', 'named-imports.ts']) fs.copyFileSync(path.join(sources, f), path.join(consumer, 'src', f))
    sh('npm', ['install', '--no-audit', '--no-fund', packed.root, packed.platform, TYPESCRIPT, TYPES_NODE], { cwd: consumer, env: installEnv })
    const installed = path.join(consumer, 'node_modules', pkg.name)
    if (fs.readdirSync(installed).some((f) => f.endsWith('.node'))) throw new Error('a binary landed in the root package')
  })

  await step('tsc --noEmit (strict) against the shipped index.d.ts, then compile', () => {
    const tsc = path.join(consumer, 'node_modules', 'typescript', 'bin', 'tsc')
    sh(process.execPath, [tsc, '--noEmit', '-p', '.'], { cwd: consumer, env: installEnv })
    sh(process.execPath, [tsc, '-p', '.', '--noCheck'], { cwd: consumer, env: installEnv }) // emit only: checked above
  })

  const home = path.join(work, 'home')
  fs.mkdirSync(home)
  // The test hooks' variables are set: the published binary must ignore them (a first index
  // passes the `before-swap` crash point; a recall carrying the panic marker resolves).
  const runEnv = {
    ...process.env,
    PATH: noRustPath,
    HOME: home,
    USERPROFILE: home,
    XDG_CACHE_HOME: path.join(home, '.cache'),
    WIKI_HOME: home,
    LLM_WIKI_CRASH_AT: 'before-swap',
    LLM_WIKI_TEST_PANIC: 'llm-wiki-test-panic:',
  }
  for (const v of ['ORT_DYLIB_PATH', 'LLM_WIKI_MODELS_DIR', 'LLM_WIKI_EMBED_MODEL', 'LLM_WIKI_RERANK_MODEL', 'LLM_WIKI_DENSE', 'LD_LIBRARY_PATH', 'DYLD_LIBRARY_PATH', 'NAPI_RS_NATIVE_LIBRARY_PATH']) {
    delete runEnv[v]
  }

  const runConsumer = (label, nodeBin, scenario, extra = []) => {
    const vault = fs.mkdtempSync(path.join(work, `vault-${scenario}-`))
    fs.cpSync(path.join(consumer, 'node_modules', pkg.name, 'examples', 'vault'), vault, { recursive: true })
    const t = Date.now()
    const r = sh(nodeBin, [path.join(consumer, 'dist', 'consumer.js'), scenario, vault, ...extra], { cwd: consumer, env: runEnv })
    const line = r.stdout.split('\n').find((l) => l.startsWith('RESULT '))
    if (!line) throw new Error(`no result from the consumer\n${r.stdout}\n${r.stderr}`)
    const result = JSON.parse(line.slice(7))
    result.node = sh(nodeBin, ['--version'], { quiet: true }).stdout.trim()
    result.ms = Date.now() - t
    report.runs.push({ label, scenario, ...result })
    log(indent(JSON.stringify(result, null, 2)))
    return { result, vault }
  }

  for (const [label, nodeBin] of nodes) {
    await step(`lexical engine, no ONNX Runtime anywhere (node ${label})`, () => {
      const { vault } = runConsumer(label, nodeBin, 'lexical')
      if (label === 'system') {
        const cli = path.join(consumer, 'node_modules', '.bin', 'llm-wiki-retrieval')
        const st = JSON.parse(sh(cli, ['status', vault, '--json'], { cwd: consumer, env: runEnv }).stdout)
        if (st.state !== 'ready') throw new Error(`CLI status ${st.state}`)
        log(`    bin/llm-wiki-retrieval status: ${st.state}, ${st.totalDocuments} documents`)
      }
    })
    await step(`ESM named imports of the package (node ${label})`, () => {
      const r = sh(nodeBin, [path.join(consumer, 'dist', 'named-imports.js')], { cwd: consumer, env: runEnv, allowFail: true })
      if (r.status === 0) {
        log(`    ok: ${r.stdout.trim()}`)
        return
      }
      const msg = `ESM named imports fail at run time although tsc accepts them (node ${label}): ${(r.stderr.match(/SyntaxError: .*/) || [r.stderr.trim()])[0]}`
      if (STRICT_ESM) throw new Error(msg)
      report.warnings.push(msg)
      log(`    KNOWN ADDON BUG: ${msg}`)
    })
  }

  if (DENSE) {
    await step(`npm install ${ONNXRUNTIME_NODE} (ONNXRUNTIME_NODE_INSTALL=skip)`, () => {
      sh('npm', ['install', '--no-audit', '--no-fund', ONNXRUNTIME_NODE], {
        cwd: consumer,
        env: { ...installEnv, ONNXRUNTIME_NODE_INSTALL: 'skip' },
      })
    })
    const models = path.join(work, 'models')
    fs.cpSync(int8, path.join(models, 'all-MiniLM-L6-v2-int8'), { recursive: true })
    for (const [label, nodeBin] of nodes) {
      await step(`dense engine from the tarball install with onnxruntime-node's library only (node ${label})`, () => {
        runConsumer(label, nodeBin, 'dense', [models])
      })
    }
  }

  // 4. sizes ----------------------------------------------------------------------------------
  await step('installed sizes (du -sb)', () => {
    const nm = path.join(consumer, 'node_modules')
    const entries = [
      [pkg.name, path.join(nm, pkg.name)],
      [`${pkg.name}-${LOCAL.abi}`, path.join(nm, `${pkg.name}-${LOCAL.abi}`)],
    ]
    if (DENSE) {
      const ortDir = path.join(nm, 'onnxruntime-node')
      const libDir = path.join(ortDir, 'bin', 'napi-v6', process.platform, process.arch)
      entries.push(['onnxruntime-node (all platforms)', ortDir], [`onnxruntime-node bin/napi-v6/${process.platform}/${process.arch}`, libDir])
      for (const f of fs.readdirSync(libDir)) if (/onnxruntime\.(so|dylib|dll)|^libonnxruntime/.test(f)) entries.push([`  ${f}`, path.join(libDir, f)])
    }
    for (const [name, p] of entries) {
      const bytes = duBytes(p)
      report.sizes[name.trim()] = bytes
      log(`    ${String(bytes).padStart(11)}  ${mb(bytes).padStart(9)}  ${name}`)
    }
    const ours = report.sizes[pkg.name] + report.sizes[`${pkg.name}-${LOCAL.abi}`]
    report.sizes.total_package_plus_platform = ours
    log(`    ${String(ours).padStart(11)}  ${mb(ours).padStart(9)}  = ${pkg.name} + ${pkg.name}-${LOCAL.abi}`)
    if (DENSE) {
      const libOnly = fs
        .readdirSync(path.join(consumer, 'node_modules', 'onnxruntime-node', 'bin', 'napi-v6', process.platform, process.arch))
        .filter((f) => /^libonnxruntime\.so\.\d+$|^libonnxruntime\.\d+\.dylib$|^onnxruntime\.dll$/.test(f))
        .map((f) => report.sizes[f] || 0)
        .reduce((a, b) => a + b, 0)
      report.sizes.total_with_runtime_library_only = ours + libOnly
      log(`    ${String(ours + libOnly).padStart(11)}  ${mb(ours + libOnly).padStart(9)}  = the two packages + only the ${process.platform}-${process.arch} ONNX Runtime library the engine loads`)
    }
  })
} catch (err) {
  failed = true
  console.error(`\npack test FAILED: ${err.stack || err}`)
} finally {
  log('\n=== timings')
  for (const [name, ms] of timings) log(`  ${(ms / 1000).toFixed(1).padStart(6)} s  ${name}`)
  log(`  ${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s  total`)
  for (const w of report.warnings) log(`WARNING: ${w}`)
  if (process.env.PACK_TEST_REPORT) fs.writeFileSync(process.env.PACK_TEST_REPORT, JSON.stringify(report, null, 2))
  if (KEEP || failed) log(`temp dir kept: ${work}`)
  else fs.rmSync(work, { recursive: true, force: true })
}
if (failed) process.exit(1)
log('\npack test passed')
