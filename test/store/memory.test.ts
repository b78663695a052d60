import { taskStoreContract } from "../contract/TaskStore.contract.js"
import { memoryStore } from "../support/stores.js"

taskStoreContract("memory", () => memoryStore())
