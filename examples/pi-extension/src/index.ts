export * from './extension.js'
export * from './format.js'
export * from './resolve.js'
