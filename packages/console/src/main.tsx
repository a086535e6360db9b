import { render } from 'preact';
import { App } from './app.tsx';
import { takeTokenFromFragment } from './session.ts';
import './style.css';

takeTokenFromFragment();
const root = document.getElementById('app');
if (root) render(<App />, root);
