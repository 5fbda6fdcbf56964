export * from './extension.js'
export * from './format.js'
