#!/usr/bin/env node
'use strict'
// Command-line entry of the npm package: runs the engine's CLI (clap + indicatif) inside the
// native addon, so no separate executable has to be shipped per platform.
const { runCli } = require('..')

runCli(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (err) => {
    console.error(`error [${err.code || 'unknown'}]: ${err.message}`)
    process.exitCode = 1
  },
)
