import { lockContract } from "../contract/Lock.contract.js"
import { memoryLock } from "../support/locks.js"

lockContract("memory", () => memoryLock)
