// The spec's `wiki_resolve_conflict` tool (Pi and MCP) on llm-wiki-retrieval's `resolveConflict`.
// Parameters are the spec's (snake_case); the schema checks run here, every other rule in the
// engine, whose stable `err.code` is passed through unchanged, so Pi and MCP report identical
// validation codes and the same structured result.
import engine from 'llm-wiki-retrieval'
import type { ResolveConflictResult } from 'llm-wiki-retrieval'

import type { ToolContext, ToolResult } from './extension.js'
import { formatEngineNotes } from './format.js'

const VAULTS = ['personal', 'project'] as const
const RELATIONS = ['supersedes', 'qualifies', 'applies_under'] as const

/** `wiki_resolve_conflict` parameters (spec "Contradictions and User Resolution"). */
export interface WikiResolveConflictParams {
  vault: (typeof VAULTS)[number]
  selected_page_id: string
  other_page_id: string
  relation: (typeof RELATIONS)[number]
  scope?: string
  rationale?: string
  replaces?: string
}

/** JSON schema of the tool's parameters (what the host registers). */
export const WIKI_RESOLVE_CONFLICT_SCHEMA = Object.freeze({
  type: 'object',
  additionalProperties: false,
  required: ['vault', 'selected_page_id', 'other_page_id', 'relation'],
  properties: {
    vault: { type: 'string', enum: [...VAULTS] },
    selected_page_id: { type: 'string', description: 'The claim the user endorsed (exact page id).' },
    other_page_id: { type: 'string', description: 'The competing claim (exact page id).' },
    relation: { type: 'string', enum: [...RELATIONS], description: 'selected → other' },
    scope: { type: 'string', description: 'Required for applies_under; not allowed otherwise.' },
    rationale: { type: 'string' },
    replaces: { type: 'string', description: 'The active resolution id of this pair, to change a recorded choice.' },
  },
})

/** The schema's checks; `null` when the parameters have the right shape. */
export function validateResolveParams(p: Record<string, unknown>): string | null {
  const known = Object.keys(WIKI_RESOLVE_CONFLICT_SCHEMA.properties)
  const extra = Object.keys(p).find((k) => !known.includes(k))
  if (extra) return `unknown parameter ${extra}`
  if (!VAULTS.includes(p.vault as never)) return `vault must be one of ${VAULTS.join(', ')}`
  if (!RELATIONS.includes(p.relation as never)) return `relation must be one of ${RELATIONS.join(', ')}`
  for (const k of ['selected_page_id', 'other_page_id']) if (typeof p[k] !== 'string') return `${k} must be a string`
  for (const k of ['scope', 'rationale', 'replaces']) if (p[k] !== undefined && typeof p[k] !== 'string') return `${k} must be a string`
  return null
}

/** The structured outcome shared by Pi and MCP: the engine's result, or its error code. */
export type ResolveOutcome = { ok: true; result: ResolveConflictResult } | { ok: false; code: string; message: string }

/** Run `resolveConflict` for the vault of `cwd`. */
export async function resolveOperation(params: Record<string, unknown>, cwd: string): Promise<ResolveOutcome> {
  const invalid = validateResolveParams(params)
  if (invalid) return { ok: false, code: 'invalid_argument', message: `Invalid wiki_resolve_conflict arguments: ${invalid}` }
  const p = params as unknown as WikiResolveConflictParams
  const paths = engine.resolveVaultPaths(cwd)
  try {
    const result = await engine.resolveConflict(paths, {
      vault: p.vault,
      selectedPageId: p.selected_page_id,
      otherPageId: p.other_page_id,
      relation: p.relation,
      ...(p.scope !== undefined ? { scope: p.scope } : {}),
      ...(p.rationale !== undefined ? { rationale: p.rationale } : {}),
      ...(p.replaces !== undefined ? { replaces: p.replaces } : {}),
    })
    return { ok: true, result }
  } catch (e) {
    const err = e as { code?: string; message?: string }
    return { ok: false, code: err.code ?? 'internal_error', message: err.message ?? String(e) }
  }
}

/** One line saying what was recorded. */
export function describeResolution(r: ResolveConflictResult): string {
  const x = r.resolution
  const scope = x.scope ? ` under "${x.scope}"` : ''
  const meaning =
    x.relation === 'supersedes'
      ? `${x.otherPageId} is now historical`
      : x.relation === 'qualifies'
        ? 'both claims stay current'
        : `${x.otherPageId} still applies outside that scope`
  return `${r.created ? 'Recorded' : 'Already recorded'} resolution ${x.id}: ${x.selectedPageId} ${x.relation} ${x.otherPageId}${scope} (${meaning}). Page: ${x.pageId}`
}

/** Pi `wiki_resolve_conflict`. */
export async function wikiResolveConflict(params: Record<string, unknown>, ctx: ToolContext): Promise<ToolResult> {
  const out = await resolveOperation(params, ctx.cwd)
  if (!out.ok) {
    return { content: [{ type: 'text', text: `wiki_resolve_conflict failed (${out.code}): ${out.message}` }], details: { error: out.code, message: out.message }, isError: true }
  }
  const notes = resolutionNotes(out.result)
  return { content: [{ type: 'text', text: describeResolution(out.result) + (notes ? `\n${notes}` : '') }], details: { ...out.result } }
}

/**
 * Everything beyond "recorded" the agent must pass on: the engine's `warnings` (e.g.
 * `resolution_feedback_not_recorded`) and, when the index was not updated, its issues (e.g.
 * `resolution_index_stale`, `qmd_index_busy`).
 */
export function resolutionNotes(r: ResolveConflictResult): string {
  return formatEngineNotes([...r.warnings, ...(r.index.stale ? r.index.issues : [])])
}

/** MCP `wiki_resolve_conflict`: the same operation, the structured outcome as JSON. */
export async function mcpWikiResolveConflict(args: Record<string, unknown>, env: { root: string }) {
  const out = await resolveOperation(args, env.root)
  return { content: [{ type: 'text' as const, text: JSON.stringify(out, null, 2) }], ...(out.ok ? {} : { isError: true }) }
}
