import { parseExpressionAt, tokenizer, tokTypes } from 'acorn';
import type { Options } from 'acorn';
import { coerceError } from '../../lib/errors.ts';

const OPTIONS: Options = { ecmaVersion: 'latest' };

/** Why an inline `expression` is not a single arrow function expression (rule 7), or null. */
export function expressionProblem(expression: string): string | null {
  try {
    const node = parseExpressionAt(expression, 0, OPTIONS);
    if (node.type !== 'ArrowFunctionExpression') {
      return `inline expression must be a single arrow function, found ${node.type}`;
    }
    const rest = tokenizer(expression.slice(node.end), OPTIONS).getToken();
    if (rest.type !== tokTypes.eof) return 'inline expression has code after the arrow function';
    return null;
  } catch (thrown) {
    return `inline expression does not parse: ${coerceError(thrown).message}`;
  }
}
