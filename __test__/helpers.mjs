// Shared helpers of the JavaScript tests: the addon, temp vaults, page builders, the shared
// benchmark data directory and child processes (CLI runs, crash points, lock holders).
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
/** The package root entry (`index.js`), exactly what consumers load. */
export const addon = require(path.join(repoRoot, 'index.js'))
export const CLI = path.join(repoRoot, 'bin', 'llm-wiki-retrieval.js')

/**
 * Test hooks (cargo feature `test-hooks`, which `npm test` builds with and published binaries
 * lack): a `recallWiki` whose query starts with `$LLM_WIKI_TEST_PANIC` panics on its native job
 * thread, and `LLM_WIKI_CRASH_AT=<point>` SIGKILLs a reindex at that point. Child processes
 * inherit the variable.
 */
export const PANIC_MARKER = 'llm-wiki-test-panic:'
process.env.LLM_WIKI_TEST_PANIC = PANIC_MARKER

/** A call that panics inside the addon (a build with test hooks) and should reject. */
export function nativePanic(message) {
  const policy = { includePersonal: false, minScore: 0, maxPerVault: 1, maxResults: 1 }
  return addon.recallWiki({ root: path.join(repoRoot, 'no-such-vault') }, `${PANIC_MARKER} ${message}`, { policy, mode: 'lexical' })
}

/** True when the built addon has the test hooks. */
export const testHooks = await nativePanic('probe').then(
  () => false,
  (e) => e.code === 'internal_panic',
)
if (!testHooks && process.env.LLM_WIKI_REQUIRE_TEST_HOOKS === '1') {
  throw new Error('LLM_WIKI_REQUIRE_TEST_HOOKS=1 but the addon was built without the test-hooks feature (napi build --features test-hooks)')
}
/** `skip` option of tests that need the hooks. */
export const NEEDS_HOOKS = testHooks ? false : 'the addon was built without the test-hooks cargo feature'

export const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i

/** Automatic recall policy of the contract (before_agent_start). */
export const AUTOMATIC = Object.freeze({ includePersonal: false, minScore: 0.5, maxPerVault: 10, maxResults: 3 })
/** Explicit recall policy of the contract (wiki_recall). */
export const EXPLICIT = Object.freeze({ includePersonal: true, minScore: 0.25, maxPerVault: 10, maxResults: 5 })

/** A fresh temp directory (real path, symlinks resolved); the caller removes it with `rmDir`. */
export function makeTmp(prefix = 'llmwiki-test-') {
  return fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)))
}

export function rmDir(dir) {
  if (dir) fs.rmSync(dir, { recursive: true, force: true })
}

/** A fresh temp directory removed after the test `t`. */
export function tmpDir(t, prefix = 'llmwiki-test-') {
  const dir = makeTmp(prefix)
  t.after(() => rmDir(dir))
  return dir
}

/**
 * Point the personal vault at `dir` (or at a directory that does not exist). The native code
 * reads WIKI_HOME at call time, so set it before every call that depends on it.
 */
export function setWikiHome(dir) {
  process.env.WIKI_HOME = dir
  return dir
}

/** WIKI_HOME pointing at a non-existent directory inside `base`. */
export function noPersonalVault(base) {
  return setWikiHome(path.join(base, 'no-personal-vault-here'))
}

/** Markdown text of a page with YAML frontmatter. */
export function page({ type = 'concept', title, status, aliases, tags, body = '', extra = '' } = {}) {
  const lines = ['---', `type: ${type}`]
  if (title !== undefined) lines.push(`title: ${JSON.stringify(title)}`)
  if (status !== undefined) lines.push(`status: ${status}`)
  if (aliases) lines.push(`aliases: ${JSON.stringify(aliases)}`)
  if (tags) lines.push(`tags: ${JSON.stringify(tags)}`)
  if (extra) lines.push(extra)
  lines.push('---', '', body, '')
  return lines.join('\n')
}

/** A made-up alphabetic word, unique per `i` and per `salt` (no real English word collides). */
export function uniqueWord(i, salt = 'q') {
  const letters = 'bcdfghjklm'
  const digits = String(i)
    .split('')
    .map((d) => letters[Number(d)])
    .join('')
  return `zx${salt}${digits}vor`
}

/** Pages `concepts/topic-<i>` (i < n), each holding its own unique word. Returns `{rel: text}`. */
export function topicPages(n, { salt = 'q', type = 'concept', dir = 'concepts' } = {}) {
  const pages = {}
  for (let i = 0; i < n; i++) {
    pages[`${dir}/topic-${i}.md`] = page({
      type,
      title: `Topic ${i}`,
      body: `# Section ${i}\n\nThis note about ${uniqueWord(i, salt)} records fact number ${i}.`,
    })
  }
  return pages
}

/** Absolute locations of a vault created by `makeVault`. */
export function vaultInfo(root) {
  const dotWiki = path.join(root, '.llm-wiki')
  const store = path.join(dotWiki, 'meta', 'qmd')
  return {
    root,
    paths: { root },
    dotWiki,
    config: path.join(dotWiki, 'config.json'),
    wiki: path.join(dotWiki, 'wiki'),
    store,
    /** The live store directory: the one `CURRENT` names (a path that does not exist without one). */
    get current() {
      return currentStoreDir(store)
    },
    pointer: path.join(store, 'CURRENT'),
    /** The lock marker directory (`index.lock/owner.json`), present while a writer holds the lock. */
    lockDir: path.join(store, 'index.lock'),
    lastError: path.join(store, 'last-error.json'),
  }
}

/** The store directory `<store>/CURRENT` names, or a path that does not exist when there is none. */
export function currentStoreDir(store) {
  try {
    return path.join(store, fs.readFileSync(path.join(store, 'CURRENT'), 'utf8').trim())
  } catch {
    return path.join(store, 'no-current-store')
  }
}

/** Names of the `store-<uuid>` directories of a store. */
export function storeDirs(store) {
  return fs.existsSync(store) ? fs.readdirSync(store).filter((n) => /^store-[0-9a-f-]{36}$/.test(n)).sort() : []
}

/** Create a vault at `root` with `config` (object or raw string) and `pages` ({rel: text}). */
export function makeVault(root, { config = { name: 'Test vault' }, pages = {} } = {}) {
  const v = vaultInfo(root)
  fs.mkdirSync(v.wiki, { recursive: true })
  fs.writeFileSync(v.config, typeof config === 'string' ? config : JSON.stringify(config, null, 2))
  writePages(v, pages)
  return v
}

/** Write (or overwrite) pages relative to `wiki/`. */
export function writePages(v, pages) {
  for (const [rel, text] of Object.entries(pages)) {
    const file = path.join(v.wiki, rel)
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, text)
  }
}

/** Replace a page's content and push its mtime later, so size+mtime change detection sees it. */
export function editPage(v, rel, text, secondsLater = 10) {
  const file = path.join(v.wiki, rel)
  const before = fs.statSync(file).mtimeMs
  fs.writeFileSync(file, text)
  const later = new Date(Math.max(before, Date.now()) + secondsLater * 1000)
  fs.utimesSync(file, later, later)
}

export function readJson(file) {
  return JSON.parse(fs.readFileSync(file, 'utf8'))
}

/** reindexWiki on one vault; asserts there is exactly one result and returns it. */
export async function reindexOne(paths, input = {}) {
  const r = await addon.reindexWiki(paths, { components: ['lexical'], ...input })
  if (r.results.length !== 1) throw new Error(`expected one vault result, got ${r.results.length}`)
  return r.results[0].result
}

/**
 * `reindexOne` right after the lock holder was killed. The OS frees a dead process's lock; on
 * Windows it does so asynchronously ("the time it takes ... depends upon available system
 * resources", LockFileEx), so there, and only there, a busy answer is retried for up to 5 s.
 */
export async function reindexAfterHolderDied(paths, input = {}) {
  const deadline = Date.now() + (process.platform === 'win32' ? 5000 : 0)
  for (;;) {
    const r = await reindexOne(paths, input)
    const busy = r.errors.length === 1 && r.errors[0].code === 'qmd_index_busy'
    if (!busy || Date.now() >= deadline) return r
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** Ids of an explicit (project-only unless WIKI_HOME says otherwise) lexical recall. */
export async function recallIds(paths, query, policy = EXPLICIT) {
  const r = await addon.recallWiki(paths, query, { policy, mode: 'lexical' })
  return r.results.map((x) => x.id)
}

/** Root of the shared, read-only data (benchmarks). Never copied into the repo. */
export function sharedDir() {
  return process.env.LLM_WIKI_SHARED || path.resolve(repoRoot, '..', 'shared')
}

/**
 * `false` when the shared benchmark data holds the Pi vault, else the reason to skip a test that
 * needs it (`npm test` passes from a plain clone; `.ci/run` has ../shared beside the clone, so
 * there these tests run).
 */
export function skipWithoutPiBenchVault() {
  const src = path.join(sharedDir(), 'bench', 'pi', 'vault')
  return fs.existsSync(path.join(src, '.llm-wiki', 'config.json'))
    ? false
    : `needs the shared benchmark data (${path.join('..', 'shared', 'bench', 'pi', 'vault')} or LLM_WIKI_SHARED)`
}

/** Copy the Pi benchmark vault into `dest`; throws a clear error when the shared data is missing. */
export function copyPiBenchVault(dest) {
  const src = path.join(sharedDir(), 'bench', 'pi', 'vault')
  if (!fs.existsSync(path.join(src, '.llm-wiki', 'config.json'))) {
    throw new Error(
      `Pi benchmark vault not found at ${src}: set LLM_WIKI_SHARED to the shared data directory (containing bench/pi/vault)`,
    )
  }
  fs.cpSync(src, dest, { recursive: true })
  return vaultInfo(dest)
}

/**
 * Spawn a child process and collect its output. Resolves `{code, signal, stdout, stderr, pid}`;
 * kills it (SIGKILL) and rejects after `timeoutMs`.
 */
export function runChild(command, args, { env = {}, timeoutMs = 60_000, cwd = repoRoot } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`${command} ${args.join(' ')} timed out after ${timeoutMs} ms\n${stderr}`))
    }, timeoutMs)
    child.on('error', (e) => {
      clearTimeout(timer)
      reject(e)
    })
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr, pid: child.pid })
    })
  })
}

/** Run the package CLI (`node bin/llm-wiki-retrieval.js ...`) in a child process. */
export function runCli(args, opts = {}) {
  return runChild(process.execPath, [CLI, ...args], opts)
}

/** Run a Node ESM/CJS snippet with `node -e` in a child process. */
export function runNodeScript(source, opts = {}) {
  return runChild(process.execPath, ['-e', source], opts)
}

/**
 * A CLI child stopped at a crash point (`LLM_WIKI_PAUSE_AT`) until it is resumed (stdin closed)
 * or killed: a real writer holding the store's lock in another process. Resolves once it is
 * paused, with `{pid, kill(): Promise<result>, resume(): Promise<result>}`.
 */
export function spawnPausedCli(args, point, { env = {} } = {}) {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: repoRoot,
    env: { ...process.env, ...env, LLM_WIKI_PAUSE_AT: point },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => (stdout += d))
  const exited = new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })))
  const handle = {
    pid: child.pid,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      return exited
    },
    async resume() {
      child.stdin.end()
      return exited
    },
  }
  return new Promise((resolve, reject) => {
    child.stderr.on('data', (d) => {
      stderr += d
      if (stderr.includes(`LLM_WIKI_PAUSE_AT=${point}`)) resolve(handle)
    })
    exited.then((r) => reject(new Error(`the CLI exited before pausing at ${point}: ${r.code} ${r.signal}\n${r.stderr}`)))
  })
}

/** A long-lived child process (for lock ownership); returns `{pid, kill(): Promise<void>}`. */
export function spawnSleeper() {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' })
  const exited = new Promise((resolve) => child.on('exit', resolve))
  return {
    pid: child.pid,
    child,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    },
  }
}

/** True when a process with this pid exists. */
export function processAlive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return e.code === 'EPERM'
  }
}

/**
 * A real holder of the vault's events lock (`meta/events.lock`, an OS file lock): a CLI
 * `feedback compact --dry-run` paused right after it took the lock (`LLM_WIKI_PAUSE_AT`,
 * test-hooks builds only). `resume()` lets it finish and release; `kill()` kills it (the OS
 * releases its lock).
 */
export function eventsLockHolder(root, { env = {} } = {}) {
  return spawnPausedCli(['feedback', 'compact', root, '--dry-run'], 'events-locked', { env })
}

/** The events lock of a `.llm-wiki/` folder is free: no file, or a file with no holder's record. */
export function eventsLockReleased(dotWiki) {
  const lock = path.join(dotWiki, 'meta', 'events.lock')
  return !fs.existsSync(lock) || fs.readFileSync(lock, 'utf8') === ''
}
