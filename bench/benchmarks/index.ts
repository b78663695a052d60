/** Every benchmark, in the order the report shows them. */
import type { Benchmark } from "../harness.js"
import { coldStart } from "./coldStart.js"
import { submitVsFloor } from "./submitVsFloor.js"

export const benchmarks: ReadonlyArray<Benchmark> = [submitVsFloor, coldStart]
