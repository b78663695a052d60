/** Every benchmark, in the order the report shows them. */
import type { Benchmark } from "../harness.js"
import { passVsHistory } from "./passVsHistory.js"
import { submitVsFloor } from "./submitVsFloor.js"

export const benchmarks: ReadonlyArray<Benchmark> = [submitVsFloor, passVsHistory]
