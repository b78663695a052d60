/**
 * What one MCP client may cost a server, in one place (docs/mcp.md lists them for users).
 *
 * A message is one line of JSON-RPC: at most MaxMessageBytes, which leaves room for a payload at
 * its own limit (1 MiB as canonical JSON) written out with escapes and whitespace. A longer line
 * is answered with an error and skipped without being held whole. Tool arguments may nest
 * MaxArgumentDepth levels (the arguments object is level 1); deeper calls are refused as
 * InvalidArguments and audited. The audit log keeps at most MaxAuditedArgumentBytes of each
 * call's (redacted) arguments, and says what it cut.
 */
export const MaxMessageBytes = 4 * 1024 * 1024

/** Deeper than this, a message is not built: its syntax is checked and the excess elided. */
export const MaxMessageDepth = 1000

export const MaxArgumentDepth = 64

export const MaxAuditedArgumentBytes = 16 * 1024
