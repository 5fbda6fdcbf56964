'use strict'
// Public entry point. The native functions live in the generated loader (`binding.js`, which
// picks the platform binary); this thin layer only makes every async export reject instead of
// throwing synchronously on bad argument types, and marks already-aborted signals (an
// AbortSignal that fired before the call never notifies native code).
const binding = require('./binding.js')

function reject(fn) {
  return function (...args) {
    try {
      return fn.apply(this, args)
    } catch (err) {
      return Promise.reject(err)
    }
  }
}

function withAbortState(options) {
  if (options && options.signal && options.signal.aborted) {
    return { ...options, aborted: true }
  }
  return options
}

module.exports = {
  ...binding,
  reindexWiki: reject((activePaths, input) => binding.reindexWiki(activePaths, withAbortState(input))),
  recallWiki: reject((paths, rawQuery, opts) => binding.recallWiki(paths, rawQuery, withAbortState(opts))),
  readIndexStatus: reject(binding.readIndexStatus),
  runCli: reject(binding.runCli),
  debugPanic: reject(binding.debugPanic),
}
