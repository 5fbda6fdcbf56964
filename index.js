'use strict'
// Public entry point. The native functions live in the generated loader (`binding.js`, which
// picks the platform binary); this thin layer
//  - makes every async export reject instead of throwing synchronously on bad argument types,
//  - marks already-aborted signals (an AbortSignal that fired before the call never notifies
//    native code), and
//  - offers the `onnxruntime-node` package's ONNX Runtime library, when that package is
//    installed, as a candidate for the dense engine (explicit options and ORT_DYLIB_PATH win).
//    Loading this module changes no setting: the library is only added to the candidate list
//    (`addOnnxRuntimeCandidates`), so a `require()` in a worker thread leaves the settings the
//    main thread configured alone.
//  - searches a source checkout's `.models/` (where `scripts/fetch_models.py` builds the models)
//    when it exists, after `configure({modelRoots})` and LLM_WIKI_MODELS_DIR, before the user
//    cache (`addModelRoots`): the demo, tests, CLI and examples run from a checkout find the
//    models that script built without a variable. An installed package has no `.models/`.
const { existsSync, readdirSync } = require('node:fs')
const { dirname, join } = require('node:path')
const binding = require('./binding.js')

// Statuses napi-rs reports for an argument of the wrong type (its `Status` names): every export
// reports them as the engine's `invalid_argument` instead, the napi status kept as `napiCode`.
const ARGUMENT_STATUSES = new Set([
  'InvalidArg',
  'ObjectExpected',
  'StringExpected',
  'NameExpected',
  'FunctionExpected',
  'NumberExpected',
  'BooleanExpected',
  'ArrayExpected',
  'BigintExpected',
  'DateExpected',
  'ArrayBufferExpected',
  'DetachableArraybufferExpected',
])

function argumentError(err) {
  if (err && typeof err === 'object' && ARGUMENT_STATUSES.has(err.code)) {
    err.napiCode = err.code
    err.code = 'invalid_argument'
  }
  return err
}

/** A synchronous export whose argument-type errors carry `code: 'invalid_argument'`. */
function typed(fn) {
  return function (...args) {
    try {
      return fn.apply(this, args)
    } catch (err) {
      throw argumentError(err)
    }
  }
}

/** An async export that rejects (never throws), argument-type errors as `invalid_argument`. */
function reject(fn) {
  return function (...args) {
    try {
      const out = fn.apply(this, args)
      return out && typeof out.then === 'function' ? out.then(undefined, (err) => Promise.reject(argumentError(err))) : out
    } catch (err) {
      return Promise.reject(argumentError(err))
    }
  }
}

function withAbortState(options) {
  if (options && options.signal && options.signal.aborted) {
    return { ...options, aborted: true }
  }
  return options
}

/** Libraries shipped by an installed `onnxruntime-node` package for this platform. */
function onnxruntimeNodeLibraries() {
  let pkg
  try {
    pkg = dirname(require.resolve('onnxruntime-node/package.json', { paths: [process.cwd(), __dirname] }))
  } catch {
    return []
  }
  const dir = join(pkg, 'bin', 'napi-v6', process.platform, process.arch)
  if (!existsSync(dir)) return []
  const wanted = { linux: /^libonnxruntime\.so(\.\d+)*$/, darwin: /^libonnxruntime(\.\d+)*\.dylib$/, win32: /^onnxruntime\.dll$/ }
  const re = wanted[process.platform]
  return re ? readdirSync(dir).filter((f) => re.test(f)).map((f) => join(dir, f)) : []
}

const detectedRuntimes = onnxruntimeNodeLibraries()
if (detectedRuntimes.length > 0) binding.addOnnxRuntimeCandidates(detectedRuntimes)

const checkoutModels = join(__dirname, '.models')
if (existsSync(checkoutModels)) binding.addModelRoots([checkoutModels])

const wrapped = {
  reindexWiki: reject((activePaths, input) => binding.reindexWiki(activePaths, withAbortState(input))),
  recallWiki: reject((paths, rawQuery, opts) => binding.recallWiki(paths, rawQuery, withAbortState(opts))),
  readIndexStatus: reject(binding.readIndexStatus),
  downloadModel: reject((options) => binding.downloadModel(withAbortState(options))),
  runCli: reject(binding.runCli),
  recallMemory: reject((paths, rawQuery, opts) => binding.recallMemory(paths, rawQuery, withAbortState(opts))),
  neighbours: reject(binding.neighbours),
  linkPath: reject(binding.linkPath),
  wikiIndex: reject(binding.wikiIndex),
  graphQuery: reject((paths, query, opts) => binding.graphQuery(paths, query, withAbortState(opts))),
  recoverIndex: reject(binding.recoverIndex),
  ensureVaultId: reject(binding.ensureVaultId),
  initVault: reject(binding.initVault),
  resolveConflict: reject(binding.resolveConflict),
  confirmRecallShown: reject(binding.confirmRecallShown),
  recordRecallFeedback: reject(binding.recordRecallFeedback),
  rebuildFeedback: reject(binding.rebuildFeedback),
  watchWiki: reject((paths, opts) => binding.watchWiki(paths, withAbortState(opts))),
  compactFeedback: reject(binding.compactFeedback),
  feedbackStatus: reject(binding.feedbackStatus),
}

// One literal assignment per export: Node's ES-module loader only detects CommonJS names it can
// see written out, so `import { recallWiki } from 'llm-wiki-retrieval'` needs them spelled here.
exports.__napiBindingTarget = binding.__napiBindingTarget
exports.addModelRoots = typed(binding.addModelRoots)
exports.addOnnxRuntimeCandidates = typed(binding.addOnnxRuntimeCandidates)
exports.compactFeedback = wrapped.compactFeedback
exports.configure = typed(binding.configure)
exports.confirmRecallShown = wrapped.confirmRecallShown
exports.endRecallSession = typed(binding.endRecallSession)
exports.ensureVaultId = wrapped.ensureVaultId
exports.downloadModel = wrapped.downloadModel
exports.engineInfo = typed(binding.engineInfo)
exports.feedbackStatus = wrapped.feedbackStatus
exports.graphQuery = wrapped.graphQuery
exports.initVault = wrapped.initVault
exports.linkPath = wrapped.linkPath
exports.modelStatus = typed(binding.modelStatus)
exports.neighbours = wrapped.neighbours
exports.personalVaultPaths = typed(binding.personalVaultPaths)
exports.readIndexStatus = wrapped.readIndexStatus
exports.rebuildFeedback = wrapped.rebuildFeedback
exports.recallSessionStats = typed(binding.recallSessionStats)
exports.recallSkipReason = typed(binding.recallSkipReason)
exports.recordRecallFeedback = wrapped.recordRecallFeedback
exports.recallMemory = wrapped.recallMemory
exports.recoverIndex = wrapped.recoverIndex
exports.recallWiki = wrapped.recallWiki
exports.reindexWiki = wrapped.reindexWiki
exports.resolveConflict = wrapped.resolveConflict
exports.resolveVaultPaths = typed(binding.resolveVaultPaths)
exports.runCli = wrapped.runCli
exports.watchWiki = wrapped.watchWiki
exports.wikiIndex = wrapped.wikiIndex
