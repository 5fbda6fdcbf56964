export * from './extension.js'
export * from './feedback.js'
export * from './format.js'
export * from './resolve.js'
