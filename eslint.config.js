import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * Only the public, documented API of each library (issue 48). An underscore-prefixed member is a
 * library's private one (ws's `_decompress`, zlib's `_handle`, xstate's `_parent`…): none may be
 * reached, through a cast or not; `_type` is the lock file's own field (spec/lockfile.md). A file
 * inside a package is reached only where its documentation says so: elkjs documents
 * `elkjs/lib/elk.bundled.js` as its browser bundle.
 */
const PUBLIC_API_ONLY = {
  'no-restricted-syntax': [
    'error',
    {
      selector: 'MemberExpression[computed=false] > Identifier.property[name=/^_(?!type$)/]',
      message: "an underscore-prefixed member is a library's private one: use its public API (say in the note what is missing)",
    },
    {
      selector: "MemberExpression[computed=true] > Literal.property[value=/^_(?!type$)/]",
      message: "an underscore-prefixed member is a library's private one: use its public API (say in the note what is missing)",
    },
    {
      selector: "CallExpression[callee.property.name='resolve'][callee.object.name='require'] > Literal[value=/^(@[^/]+\\/)?[^./][^/]*\\/(?!lib\\/elk\\.bundled\\.js$)/]",
      message: "a file inside a package is not its public API: import the package's documented entry",
    },
  ],
  'no-restricted-imports': [
    'error',
    {
      patterns: [
        {
          regex: '^(@[^/]+/)?[^./@][^/]*/(lib|dist|src|build|internal)/',
          message: "a file inside a package is not its public API: import the package's documented entry",
        },
      ],
    },
  ],
};

export default tseslint.config(
  { ignores: ['node_modules/**', '.switchyard/**', 'bench/results/**', 'test-artifacts/**', 'bin/**', 'scratch/**', 'eslint.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      'no-empty': ['error', { allowEmptyCatch: false }],
      'max-lines': ['error', { max: 400, skipBlankLines: true, skipComments: true }],
      'max-lines-per-function': ['error', { max: 60, skipBlankLines: true, skipComments: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      ...PUBLIC_API_ONLY,
    },
  },
  {
    // Statechart definitions are declarative data; one config object spans the whole chart.
    files: ['machines/**/*.machine.ts'],
    rules: { 'max-lines-per-function': 'off' },
  },
  {
    // The visualizer's browser scripts: plain classic scripts (modules cannot load from file://).
    files: ['visualize/public/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'script',
      globals: Object.fromEntries(
        ['window', 'document', 'location', 'history', 'sessionStorage', 'fetch', 'WebSocket', 'URL', 'URLSearchParams', 'Node', 'ELK', 'setTimeout', 'clearTimeout']
          .map((name) => [name, 'readonly']),
      ),
    },
  },
  {
    // node:test suites group many cases inside one describe() callback.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      'max-lines-per-function': 'off',
      '@typescript-eslint/no-floating-promises': 'off',
    },
  },
);
