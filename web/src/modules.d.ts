/** Modules the build provides (scripts/build-web.ts): the provider catalogue, and styles bundled as CSS. */
declare module "virtual:catalog" {
  const value: unknown
  export default value
}
declare module "*.css"
