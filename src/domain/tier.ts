/**
 * What a tool may do: read only, write, or destroy. The MCP pipeline permits `destructive` calls
 * only when a `ConfirmPolicy` says yes, and the policy is told the tier it decides on.
 */
export type Tier = "read_only" | "write" | "destructive"
