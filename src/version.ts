/** Kept equal to package.json's version (a test checks it). */
export const Version = "0.1.0"
